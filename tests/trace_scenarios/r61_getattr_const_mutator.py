# Review 61 (w10_getattr_const_mutator): a container method fetched with getattr and a constant name: getattr(reg, "append")(1): a write through it is never reused since.
np.typecodes["zz"] = []


def mk():
    def f(a):
        reg = np.typecodes["zz"]
        getattr(reg, "append")(1)
        return a + 1

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
show("n", lambda: np.array(len(np.typecodes["zz"])))
