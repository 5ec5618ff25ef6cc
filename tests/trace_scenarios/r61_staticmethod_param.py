# Review 61 (w5_staticmethod_param): a staticmethod's first parameter is taken as `self`: a write through it to a library dict passes: a write through it is never reused since.
class Util:
    @staticmethod
    def note(registry, key):
        registry.update({key: registry.get(key, "") + "x"})


def mk():
    def f(a):
        Util.note(np.typecodes, "zz")
        return a + 1

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
show("n", lambda: np.array(len(np.typecodes["zz"])))
