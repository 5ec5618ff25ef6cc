# Review 65 (nonlocal_inplace): a local rebound to os.environ by a nested function (nonlocal), then `env |= {...}` in the outer body: never reused since.
import os


def body(a):
    env = {}

    def bind():
        nonlocal env
        env = os.environ

    bind()
    env |= {"R65_FLAG": "1"}
    return a + 1


mk = lambda: jax.jit(lambda a: body(a))
for i in range(2):
    os.environ.pop("R65_FLAG", None)
    show(f"s{i}", lambda: mk()(x))
    show(f"e{i}", lambda: np.array("R65_FLAG" in os.environ))
