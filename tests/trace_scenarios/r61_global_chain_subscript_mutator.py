# Review 61 (w12_global_chain_subscript_mutator): the plainest form: a container method on an item of a library dict named by a global chain: a write through it is never reused since.
np.typecodes["zz"] = []


def mk():
    def f(a):
        np.typecodes["zz"].append(1)
        return a + 1

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
show("n", lambda: np.array(len(np.typecodes["zz"])))
