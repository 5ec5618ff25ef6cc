# Review 61 (w6_free_class_mutator): an unbound mutator called through a closure variable holding a class (L = list; L.append(lib_list, 1)): a write through it is never reused since.
np.typecodes["zz"] = []


def mk():
    L = list

    def f(a):
        L.append(np.typecodes["zz"], 1)
        return a + 1

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
show("n", lambda: np.array(len(np.typecodes["zz"])))
