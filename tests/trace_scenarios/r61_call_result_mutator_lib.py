# Review 61 (w2b_call_result_mutator_lib): a container method on a call's result: registry().update(...), registry() a user helper returning a library dict: a write through it is never reused since.
def registry():
    return np.typecodes


def mk():
    def f(a):
        registry().update(zz=registry().get("zz", "") + "x")
        return a + 1

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
show("n", lambda: np.array(len(np.typecodes["zz"])))
