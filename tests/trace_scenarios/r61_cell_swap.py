# Review 61 (w3_cell_swap): a local built in the frame ({}), rebound by a nested function (nonlocal) to a library dict, then written: a write through it is never reused since.
def mk():
    def f(a):
        d = {}

        def swap():
            nonlocal d
            d = np.typecodes

        swap()
        d.update(zz=d.get("zz", "") + "x")
        return a + 1

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
show("n", lambda: np.array(len(np.typecodes["zz"])))
