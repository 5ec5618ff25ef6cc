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
* ``hlo_callback [FACTOR]``: host callbacks in a program the jit seam does not
  key: served by the HLO seam, bound to this process's callbacks.
* ``opaque_param``: a user primitive with a plain object as a param, read by its
  `mlir.lower_fun` lowering (the jit seam bypasses; the HLO seam serves it).
* ``filter_primitive``: an equinox-style filter primitive whose treedef param
  holds an equinox Module (a custom pytree node).
* ``set_order``: NeuTra's SVI step, distilled: terms summed in the order of a set
  of names (Python's string hash order, per process).
"""

from __future__ import annotations

import json
import os
import sys

import jax
import jax.extend.core
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


class Opaque:
    """A value pcache has no canonical form for."""

    def __format__(self, spec):
        return "opaque"


def case_hlo_callback():
    # The jit seam does not key this program (`jax.debug.print` with a static
    # argument it has no canonical form for, in a primitive whose Python may run at
    # compile time): it reaches JAX's compile with host callbacks, where the HLO
    # seam serves it (JAX's own cache refuses it). The callbacks depend on FACTOR
    # (argv), never the traced computation: a hit must run this process's own.
    from jax.experimental import io_callback

    factor = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    seen = []

    def host(v):
        return (np.asarray(v) * factor).astype(np.float32)

    def record(v):
        seen.append(float(np.asarray(v).sum()))
        return np.zeros((), np.float32)

    def f(x):
        jax.debug.print("{} {}", Opaque(), x[0])
        z = jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x * 3.0)
        r = io_callback(record, jax.ShapeDtypeStruct((), jnp.float32), z, ordered=True)
        return jnp.sin(z) + r

    x = jnp.arange(6.0, dtype=jnp.float32)
    out = [jax.jit(f)(x), jax.jit(f)(x + 1)]
    return [*out, np.asarray(seen, np.float32)]


class Scale:
    """A library's configuration object: a plain class, no canonical form."""

    def __init__(self, k):
        self.k = k


def case_opaque_param():
    # A user primitive whose param is a plain object that its lowering reads
    # (`mlir.lower_fun` over user code): keyed by its lowered module. Two
    # configurations that differ only in that object are two programs.
    from jax.extend.core import Primitive
    from jax.interpreters import mlir

    scale_p = Primitive("scale_by_cfg")
    scale_p.def_abstract_eval(lambda x, *, cfg: jax.core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(scale_p, mlir.lower_fun(lambda x, *, cfg: x * cfg.k, False))
    x = jnp.arange(6.0, dtype=jnp.float32)
    return [jax.jit(lambda v, k=k: scale_p.bind(v, cfg=Scale(k)) + 1)(x) for k in (2.0, 3.0, 2.0)]


def case_filter_primitive():
    # equinox's filter primitives (lineax's linear_solve, optimistix's root finds)
    # carry the treedef of their pytree arguments, with equinox Modules (custom
    # pytree nodes, no serialized form) in it: once memory-only
    # (`unserializable-pytree`), now keyed by their lowered module.
    import equinox as eqx
    import equinox.internal as eqxi
    from jax.interpreters import mlir

    class Affine(eqx.Module):
        w: jax.Array
        b: jax.Array

    def impl(*dynamic, treedef, static, flatten):
        del flatten
        leaves = [d if s is None else s for d, s in zip(dynamic, static, strict=True)]
        m, x = jax.tree.unflatten(treedef, leaves)
        return [m.w * x + m.b]

    def abstract(*dynamic, treedef, static, flatten):
        del treedef, static, flatten
        return [jax.core.ShapedArray(dynamic[-1].shape, dynamic[-1].dtype)]

    prim = jax.extend.core.Primitive("affine_filter")
    prim.multiple_results = True
    prim.def_impl(impl)
    prim.def_abstract_eval(abstract)
    mlir.register_lowering(prim, mlir.lower_fun(impl, multiple_results=True))

    def apply(m, x):
        leaves, treedef = jax.tree.flatten((m, x))
        static = tuple(None for _ in leaves)
        return prim.bind(*leaves, treedef=treedef, static=static, flatten=None)[0]

    del eqxi
    m = Affine(jnp.full(4, 2.0, jnp.float32), jnp.ones(4, jnp.float32))
    x = jnp.arange(4.0, dtype=jnp.float32)
    return [jax.jit(apply)(m, x), jax.jit(lambda m, x: apply(m, x) * 2)(m, x)]


def case_set_order():
    # NeuTra's instability, distilled. NumPyro's Trace_ELBO sums its per-site terms
    # over `set(model_log_probs).union(guide_log_probs)`: the order is the one of
    # Python's string hashes, which PYTHONHASHSEED randomizes per process. Each
    # order is another program (here with other float32 results: 1e8 + 1 - 1e8).
    def loss(p):
        model_terms = {"x": p[0] * 1e8, "obs": -p[2] * 1e8}
        guide_terms = {"auto_latent": p[1]}
        union = set(model_terms).union(guide_terms)
        terms = {n: model_terms.get(n, 0.0) - guide_terms.get(n, 0.0) for n in union}
        return sum(terms.values(), start=jnp.array(0.0))

    p = jnp.ones(3, jnp.float32)
    return [jax.jit(loss)(p), jax.jit(jax.grad(loss))(p)]


CASES = {
    "vprim": case_vprim,
    "maxpool": case_maxpool,
    "hlo_callback": case_hlo_callback,
    "set_order": case_set_order,
    "opaque_param": case_opaque_param,
    "filter_primitive": case_filter_primitive,
}


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
