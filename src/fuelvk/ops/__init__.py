"""numpy-style public functions, one module per family.

Each public module (no leading underscore) lists its ops in __all__; fuelvk's namespace is built
from them, so adding a family never touches a shared file.
"""
import importlib
import pkgutil


def public_ops():
    """(name, function) for every op in every public ops module, in module order."""
    out = []
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if m.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{m.name}")
        out.extend((name, getattr(mod, name)) for name in getattr(mod, "__all__", ()))
    return out
