# Review 59 (a library-held dict written through operator.setitem (a library function mutating its argument)): a library dict written through operator.setitem: standard-library functions that write their argument are refused since.
import operator


def mk():
    def f(a):
        operator.setitem(np.sctypeDict, "r59fw11", np.float16)
        return a * 2

    return jax.jit(f)


for i in range(3):
    np.sctypeDict.pop("r59fw11", None)
    show(f"r{i}", lambda: mk()(x))
    show(f"dt{i}", lambda: np.zeros(1, dtype="r59fw11"))
