# Review 35 (c1_warnfilter_class): a warning filter whose category is a user class with a metaclass __subclasscheck__: no reuse since.
import warnings

_ctx = warnings.catch_warnings()
_ctx.__enter__()


class M(type):
    def __subclasscheck__(cls, sub):
        return cls.match


class W(Warning, metaclass=M):
    match = True


warnings.simplefilter("error")
warnings.filterwarnings("ignore", category=W)


def f(a):
    v = np.float32(3e38) * np.float32(10)
    return a * float(v > 0)


mk = lambda: jax.jit(lambda a: f(a))
show("a", lambda: mk()(x))
show("a2", lambda: mk()(x))
W.match = False
show("b", lambda: mk()(x))
_ctx.__exit__(None, None, None)
