"""Kernel families. Importing this package imports every family module, which registers itself."""
import importlib
import pkgutil

from .registry import FAMILIES, VARIANTS, Family, Variant, family, kernel  # noqa: F401

for _m in pkgutil.iter_modules(__path__):
    if _m.name != "registry":
        importlib.import_module(f"{__name__}.{_m.name}")
