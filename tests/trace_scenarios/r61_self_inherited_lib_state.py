# Review 61 (w14_self_inherited_lib_state): a classmethod of a user subclass of a library class writes through cls into a dict the library base holds: a write through it is never reused since.
class MyInfo(np.iinfo):
    @classmethod
    def note(cls):
        cls._max_vals.update(zz=cls._max_vals.get("zz", 0) + 1)


def mk():
    def f(a):
        MyInfo.note()
        return a + 1

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
show("n", lambda: np.array(np.iinfo._max_vals["zz"]))
