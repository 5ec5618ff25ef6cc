# Review 75 (ecte_jnp): a jit called under jax.ensure_compile_time_eval inside a recording (trace state looks clean there) ended the recording's trace context: the rest of the trace took in JAX's stale cached trace of F, served to a new, equal F2. A recorder records only if its own context held throughout since.
# ensure_compile_time_eval + a jnp library call (a jit) ends the recording; stale F trace served to a new F2
def make():
    def F(a, k=1.0):
        return a * k

    return F


F = make()
jax.checkpoint(F)(x)  # JAX caches a trace of F with k=1.0
F.__defaults__ = (2.0,)


def outer_for(f):
    def body(a):
        with jax.ensure_compile_time_eval():
            c = jnp.sum(jnp.arange(2.0))  # a jnp function (itself a jax.jit) on constants
        return jax.checkpoint(f)(a) + c

    return jax.jit(body)


for i in range(3):
    outer_for(F)(x)  # (F itself: afresh where stock is stale, README)
for i in range(3):
    F2 = make()
    F2.__defaults__ = (2.0,)
    show(f"C{i}", lambda: outer_for(F2)(x))
