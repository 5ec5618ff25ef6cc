"""What the seams share: the runtime they serve, and the JAX functions they wrap.

Set by `pcache._install` only; read by `pcache._jit_seam` and `pcache._hlo_seam`
on every call (a module attribute: one dictionary lookup).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pcache._cache import Runtime

#: The enabled runtime, or None (the wrappers then pass straight through).
rt: Runtime | None = None
#: JAX's original functions, by `pcache._compat.PATCH_POINTS` name, once wrapped.
ORIG: dict[str, Any] = {}
