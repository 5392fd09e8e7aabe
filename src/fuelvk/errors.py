"""The FuelVKError hierarchy.

Every error fuelvk raises is a FuelVKError; each subclass also derives from the builtin a caller
would naturally catch (TypeError for dtypes, ValueError for shapes, ...), so ``except ValueError``
keeps working for code written against numpy.
"""


class FuelVKError(Exception):
    """Base class of every fuelvk error."""


class LaunchError(FuelVKError, TypeError):
    """A kernel launched with arguments its shader does not declare (a missing, unknown or mistyped
    binding, Params field or specialization constant): a bug in fuelvk, caught before the dispatch."""


class DTypeError(FuelVKError, TypeError):
    """A dtype the op or kernel does not accept."""


class ShapeError(FuelVKError, ValueError):
    """Shapes that do not match, broadcast or fit the kernel's contract."""


class ValueCastError(FuelVKError, ValueError, OverflowError):
    """A scalar that the target dtype cannot hold (NaN or inf into an integer, an integer out of range).

    numpy raises ValueError for the first and OverflowError for the second; this is both."""


class FormatError(FuelVKError, ValueError):
    """A file that is not what the loader reads (e.g. not a GGUF file, or a truncated one)."""


class FuelVKIndexError(FuelVKError, IndexError):
    """An index outside the axis it indexes."""


class FuelVKMemoryError(FuelVKError, MemoryError):
    """Device memory could not be allocated (the message gives the sizes)."""


class UnsupportedError(FuelVKError, NotImplementedError):
    """The device lacks a feature the kernel or route needs."""


class DeviceError(FuelVKError, RuntimeError):
    """A Vulkan call failed, the device/array is no longer usable, or a FUELVK_* setting has a value
    it does not accept (fuelvk.config)."""


class BuildError(FuelVKError, RuntimeError):
    """Shader compilation failed or spv/ is stale."""


class LinAlgError(FuelVKError, ValueError):
    """A matrix the linalg function cannot factorize: singular (solve, inv) or not positive definite
    (cholesky). A ValueError, as numpy.linalg.LinAlgError is."""
