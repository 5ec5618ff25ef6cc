# Review 61 (w15_unbound_method_value): a class's mutating method held as a value (UPD = dict.update, a global): called on a library dict while traced: a write through it is never reused since.
UPD = dict.update


def mk():
    def f(a):
        UPD(np.typecodes, zz=np.typecodes.get("zz", "") + "x")
        return a + 1

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
show("n", lambda: np.array(len(np.typecodes["zz"])))
