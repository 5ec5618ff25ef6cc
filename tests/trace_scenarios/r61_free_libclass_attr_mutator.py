# Review 61 (w9_free_libclass_attr_mutator): a container method on an attribute of a library class held in a closure cell: K._unhashable_values_.append(1): a write through it is never reused since.
def mk():
    K = np._CopyMode

    def f(a):
        K._unhashable_values_.append(1)
        return a + 1

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
show("n", lambda: np.array(len(np._CopyMode._unhashable_values_)))
