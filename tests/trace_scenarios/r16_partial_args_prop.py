# Review 16: a partial subclass answers .args with a property; partial.__call__ reads its real fields.
import functools


class P(functools.partial):
    @property
    def args(self):
        return ()


def mul(k, x):
    return x * k


mk = lambda p: jax.jit(lambda x: p(x))
show("a", lambda: mk(P(mul, 2.0))(x))
show("b", lambda: mk(P(mul, 3.0))(x))
