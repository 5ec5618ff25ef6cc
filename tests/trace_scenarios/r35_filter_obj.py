# Review 35 (e3_filter_obj): a warning filter holding a user object as its message pattern: no reuse since.
import warnings

_ctx = warnings.catch_warnings()
_ctx.__enter__()


class Msg:
    on = True

    def match(self, text):
        return Msg.on


warnings.simplefilter("error")
warnings.filters.insert(0, ("ignore", Msg(), Warning, None, 0))


def f(a):
    v = np.float32(3e38) * np.float32(10)
    return a * float(v > 0)


mk = lambda: jax.jit(lambda a: f(a))
show("a", lambda: mk()(x))
show("a2", lambda: mk()(x))
Msg.on = False
show("b", lambda: mk()(x))
_ctx.__exit__(None, None, None)
