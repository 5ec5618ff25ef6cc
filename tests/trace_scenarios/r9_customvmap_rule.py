# custom_vmap's rule (wrapped by JAX in a ClosedRule object in the jaxpr's params) is
# Python of the callable run later (at batching): a reused trace runs the OLD
# callable's rule, which reads the old callable's (since mutated) captured list
from jax import custom_batching


def mk(L):
    def f(x):
        @custom_batching.custom_vmap
        def g(y):
            return y * 1.0

        @g.def_vmap
        def rule(axis_size, in_batched, y):
            return y * L[0], in_batched[0]

        return g(x)

    return jax.jit(f)


xs = jnp.ones((2, 3))
L1 = [2.0]
show("first", lambda: mk(L1)(x))  # traced (recorded), not batched
L1[0] = 7.0  # the old callable's list, no longer used
show("second", lambda: jax.vmap(mk([2.0]))(xs))  # new, equal callable, batched
