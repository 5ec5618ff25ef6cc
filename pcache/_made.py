"""Instances of library classes that the program made (issue 27, phase 3).

A library's plain instance (`pcache._walk_kinds._library_instance`: a class
statement's layout, no slots, no C state) that no library module holds is keyed by
its class and its attributes, never by its identity: what it does is its class's
library code (keyed by the distribution's version) over those attributes, and an
equal instance made again (``MCMC(NUTS(model))`` each run, in another process) is
the same program. Identity relations within what a key walks are kept by the
walk's numbering; an instance a library holds (a singleton) stays keyed by identity.

`MEMO_ATTRS` leaves out of such a key the attributes a library uses as memos keyed by
this process's object ids, each entry audited against one library version: the
methods that read them, and that no traced code does. Anything else about an
instance is in its key.
"""

from __future__ import annotations

import sys

from pcache._introspect import names
from pcache._usercode import NoReuse, module_dict

#: (module, class qualname) -> (distribution version prefix audited, attributes
#: left out, why).
MEMO_ATTRS: dict[tuple[str, str], tuple[str, frozenset[str], str]] = {
    ("numpyro.infer.mcmc", "MCMC"): (
        "numpyro-0.22.",
        frozenset({"_cache", "_init_state_cache"}),
        # numpyro 0.22.0's MCMC._get_cached_fns and _get_cached_init_state key them
        # by the ids of the model's arguments (``_hashable``) and read them in
        # ``run``, before tracing; no function MCMC traces reads either.
        "memos of jitted functions and states by argument ids, read before tracing",
    ),
}


def left_out(t: type) -> frozenset[str]:
    """The attributes of an instance of library class ``t`` its key leaves out."""
    _, qual, module = names(t)
    entry = MEMO_ATTRS.get((module, qual)) if type(module) is str else None
    if entry is None:
        return frozenset()
    m = sys.modules.get(module)
    if (module_dict(m) or {}).get(qual) is not t or "." in qual:
        return frozenset()
    from pcache._persist_env import attributed

    try:
        dist = attributed(module)
    except NoReuse:
        return frozenset()
    return entry[1] if dist.startswith(entry[0]) else frozenset()


__all__ = ["MEMO_ATTRS", "left_out"]
