# Review 65 (yield_fed_inplace): a generator fed os.environ by send(); `env |= {...}` on the yield-bound local: never reused since.
import os


def g():
    env = yield
    env |= {"R65_FLAG": "1"}
    yield


def body(a):
    it = g()
    next(it)
    it.send(os.environ)
    return a + 1


mk = lambda: jax.jit(lambda a: body(a))
for i in range(2):
    os.environ.pop("R65_FLAG", None)
    show(f"s{i}", lambda: mk()(x))
    show(f"e{i}", lambda: np.array("R65_FLAG" in os.environ))
