# Review 75 (ecte_cond): as ecte_jnp, over a lax.cond branch whose cell a nonlocal setter rebinds after an eager cond.
# lax.cond over a closure whose cell a setter rebinds after an eager use; the outer's
# recording is ended by a jnp call under ensure_compile_time_eval
def make():
    k = 1.0

    def F(a):
        return a * k

    def setk(v):
        nonlocal k
        k = v

    return F, setk


F, setk = make()
jax.lax.cond(True, F, F, x)  # eager: JAX caches F's branch trace (k=1.0)
setk(2.0)


def outer_for(f):
    def body(a):
        with jax.ensure_compile_time_eval():
            n = int(jnp.sum(jnp.ones(2)))
        return jax.lax.cond(a[0] < n, f, f, a)

    return jax.jit(body)


for i in range(3):
    outer_for(F)(x)  # (F itself: afresh where stock is stale, README)
for i in range(3):
    F2, s2 = make()
    s2(2.0)
    show(f"C{i}", lambda: outer_for(F2)(x))
