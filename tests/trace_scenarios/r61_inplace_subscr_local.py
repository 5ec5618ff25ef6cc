# Review 61 (w8_inplace_subscr_local): an in-place operator on a local bound to an item of a library dict: acc = D["zz"]; acc += [1]: a write through it is never reused since.
np.typecodes["zz"] = []


def mk():
    def f(a):
        acc = np.typecodes["zz"]
        acc += [1]
        return a + 1

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
show("n", lambda: np.array(len(np.typecodes["zz"])))
