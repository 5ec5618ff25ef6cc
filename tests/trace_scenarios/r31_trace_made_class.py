# Review 31 (c_cls2): a class made while tracing came back as the output's node type of every reused call (stock: a new class per trace); refused since.
def mk():
    def f(v):
        class P(tuple):
            _fields = ("a", "b")

            def __new__(cls, *a):
                return tuple.__new__(cls, a)

        return P(v, v * 2)

    return f


o1 = jax.jit(mk())(x)
o2 = jax.jit(mk())(x)
show("same", lambda: type(o1) is type(o2))
show("add", lambda: jax.tree_util.tree_map(lambda a, b: a + b, o1, o2)[1])
