"""The forced route of an op that has several kernels for one job (matmul, attention, qmatmul).

Each such op has a picker that chooses by shape and device; a caller (tests, benchmarks) may force a
route with route= or the op's environment variable. This is the one resolver of that choice, so every
op spells a forced route the same way and answers an unknown one with the same typed error.
"""
from .. import config
from ..errors import UnsupportedError

AUTO = "auto"


def forced_route(op, route, env, routes):
    """The route a call forces, or None when the op's picker should choose.

    route= wins over the environment variable `env`; None, "" and "auto" leave the choice to the
    picker; names are case-insensitive. A name not in `routes` is an UnsupportedError naming the op,
    the name, where it came from and the accepted routes.
    """
    source = "route=" if route is not None else env
    name = route if route is not None else config.get(env)
    name = str(name or AUTO).lower()
    if name == AUTO:
        return None
    if name not in routes:
        raise UnsupportedError(f"{op}: unknown route {name!r} (from {source}); accepted: "
                               f"{', '.join(routes)}, {AUTO}")
    return name
