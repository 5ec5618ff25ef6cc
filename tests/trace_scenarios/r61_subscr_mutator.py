# Review 61 (w1_subscr_mutator): a container method on an expression that is not a plain name: [np.typecodes][0].update(...): a write through it is never reused since.
def mk():
    def f(a):
        [np.typecodes][0].update(zz=np.typecodes.get("zz", "") + "x")
        return a + 1

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
show("n", lambda: np.array(len(np.typecodes["zz"])))
