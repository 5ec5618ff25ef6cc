# Review 61 (w4_method_foreign_self): a method called on a library object as self: Reg.put(np.typecodes) writes through self (taken as the user's object): a write through it is never reused since.
class Reg:
    def put(self):
        self.update(zz=self.get("zz", "") + "x")


def mk():
    def f(a):
        Reg.put(np.typecodes)
        return a + 1

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
show("n", lambda: np.array(len(np.typecodes["zz"])))
