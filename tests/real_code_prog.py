"""Programs shaped like real library code, for tests/test_real_code.py.

    python tests/real_code_prog.py CASE [ARG]

It never imports pcache unless it is switched on (``JAX_PCACHE_DIR``), and then only
to read its stats at the end. Prints one JSON line: each result's bytes (hex),
backend compiles and lowerings (JAX's own events), and pcache's stats.

Cases:

* ``vprim``: equinox's `create_vprim` user primitives under `filter_vmap` (equinox
  binds its ``vprim`` primitive with the user primitive as a param, lowered by
  `mlir.lower_fun` over equinox code); two primitives of the same name with other
  rules, so a key by name alone would serve one's program for the other.
* ``maxpool``: the gradient of a max pool (``select_and_scatter_add`` carries
  ``lax.ge_p`` as a param).
"""

from __future__ import annotations

import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

counts = {"compiles": 0, "lowerings": 0}


def _listener(name, secs, **kw):
    if name == "/jax/core/compile/backend_compile_duration":
        counts["compiles"] += 1
    elif name == "/jax/core/compile/jaxpr_to_mlir_module_duration":
        counts["lowerings"] += 1


jax.monitoring.register_event_duration_secs_listener(_listener)


def _vprim(name, body):
    import equinox.internal as eqxi

    def impl(x, y, *, scale):
        return [body(x) * scale + y, x * y]

    def abstract_eval(x, y, *, scale):
        aval = jax.core.ShapedArray(x.shape, x.dtype)
        return [aval, aval]

    def jvp(primals, tangents, *, scale):
        raise NotImplementedError

    def transpose(*args, **kwargs):
        raise NotImplementedError

    return eqxi.create_vprim(name, impl, abstract_eval, jvp, transpose)


def case_vprim():
    import equinox as eqx

    # Same name, other rules: only the lowered module tells their programs apart.
    sin_p = _vprim("user_op", jnp.sin)
    cos_p = _vprim("user_op", jnp.cos)

    def f(prim):
        def g(x, y):
            a, b = prim.bind(x, y, scale=2.0)
            return a + b

        return g

    x = jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4) / 5
    y = jnp.ones((3, 4), jnp.float32)
    out = []
    for prim in (sin_p, cos_p, sin_p):
        out.append(eqx.filter_jit(eqx.filter_vmap(f(prim)))(x, y))
        out.append(jax.jit(jax.vmap(f(prim), in_axes=(1, None), out_axes=1))(x, y[:, 0]))
    return out


def case_maxpool():
    from jax import lax

    def pool(a):
        return lax.reduce_window(a, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID").sum()

    def minpool(a):
        return lax.reduce_window(a, jnp.inf, lax.min, (2, 2), (2, 2), "VALID").sum()

    x = (jnp.arange(36.0, dtype=jnp.float32).reshape(6, 6) * 7) % 11
    return [jax.jit(jax.grad(pool))(x), jax.jit(jax.grad(minpool))(x)]


CASES = {"vprim": case_vprim, "maxpool": case_maxpool}


def main() -> None:
    outs = CASES[sys.argv[1]]()
    stats = {}
    if os.environ.get("JAX_PCACHE_DIR"):
        import pcache

        s = pcache.stats()
        stats = {
            k: s.get(k)
            for k in (
                "disk_hits",
                "memory_hits",
                "misses",
                "compiles",
                "bypass_reasons",
                "hlo_hits",
                "hlo_misses",
                "hlo_compiles",
            )
        }
    results = [np.asarray(o).tobytes().hex() for o in jax.tree.leaves(outs)]
    print(json.dumps({"results": results, **counts, "stats": stats}))


if __name__ == "__main__":
    main()
