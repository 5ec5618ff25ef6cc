# Review 43 (arr_attr, arr_attr_g): an attribute set on a captured jax.Array (it has
# a __dict__): identity does not cover it. Global and closure.
A = jnp.ones(3, dtype=jnp.float32)
mk = lambda: jax.jit(lambda x: x * A + A.k)
for k in (2.0, 2.0, 3.0):
    A.k = k
    show(f"g{k}", lambda: mk()(x))

a = jnp.ones(3, dtype=jnp.float32)
keep = []


def mk2(arr=a):
    f = jax.jit(lambda x: x * arr + arr.k)
    keep.append(f)
    return f


for k in (2.0, 2.0, 3.0):
    a.k = k
    show(f"c{k}", lambda: mk2()(x))
B = jnp.ones(3, dtype=jnp.float32)
mk3 = lambda: jax.jit(lambda x: x * B + getattr(B, "k", 0.0))
show("b0", lambda: mk3()(x))
B.k = 5.0
show("b5", lambda: mk3()(x))
