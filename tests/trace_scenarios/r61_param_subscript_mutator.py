# Review 61 (w7_param_subscript_mutator): a container method on an item of a parameter: reg[key].append(1) (reg a library dict): a write through it is never reused since.
np.typecodes["zz"] = []


def note(reg, key):
    reg[key].append(1)


def mk():
    def f(a):
        note(np.typecodes, "zz")
        return a + 1

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
show("n", lambda: np.array(len(np.typecodes["zz"])))
