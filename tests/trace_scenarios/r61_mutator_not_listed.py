# Review 61 (w13_mutator_not_listed): a container method whose name is not in pcache's mutator list (dict.__ior__), on a library dict named by a global chain: a write through it is never reused since.
def mk():
    def f(a):
        np.typecodes.__ior__({"yy": np.typecodes.get("yy", "") + "y"})
        return a + 1

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
show("n", lambda: np.array(len(np.typecodes["yy"])))
