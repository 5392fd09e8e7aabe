"""Array's operators and methods, bound late to the ops that implement them.

Array sits below the ops in the import graph (every op module imports it), so array.py cannot
import the ops its operators and methods call (`a + b`, `a.astype`, `a.copy()`, `a[mask]`, ...).
fuelvk/__init__ builds the public namespace and binds it here; Array looks each op up by name when
it is called. Importing any fuelvk module runs fuelvk/__init__ first, so the table is full before an
Array can exist; op modules may also bind helpers that are not public (`bind(name=fn)`).
"""
from .errors import UnsupportedError

_OPS = {}


def bind(**ops):
    """Make ops (name -> function) reachable from Array."""
    _OPS.update(ops)


def op(name):
    """The function bound to name."""
    try:
        return _OPS[name]
    except KeyError:
        raise UnsupportedError(f"fuelvk.{name} is not bound to Array (fuelvk/__init__ binds every public op; "
                               f"bound: {len(_OPS)} ops)") from None
