"""The Python array API standard (2024.12) on top of fuelvk's ops.

fuelvk's top level *is* the array namespace (see README "Array API"): every name the standard
defines is exported there, beside fuelvk's numpy-style extras. The functions in this package are
compositions of device ops (views, movement kernels, reductions, the elementwise kernels), so they
add no kernel of their own and carry no op spec; a function that needs a kernel lives in fuelvk.ops.
Each module lists its functions in __all__; fuelvk/__init__ exports them (`public()`).
"""
import importlib

MODULES = ("info", "creation", "manipulation", "statistical", "logical", "utility", "searching", "elementwise",
           "indexing")


def public():
    """(name, object) for every public name of every module here, in module order."""
    out = []
    for m in MODULES:
        mod = importlib.import_module(f"{__name__}.{m}")
        out.extend((name, getattr(mod, name)) for name in mod.__all__)
    return out
