# Review 65 (init_selfattr_inplace): __init__: self.t = env; self.t |= {...}: the in-place operator writes the mapping passed in (os.environ): never reused since.
import os


class C:
    def __init__(self, env):
        self.t = env
        self.t |= {"R65_FLAG": "1"}


def body(a):
    C(os.environ)
    return a + 1


mk = lambda: jax.jit(lambda a: body(a))
for i in range(2):
    os.environ.pop("R65_FLAG", None)
    show(f"s{i}", lambda: mk()(x))
    show(f"e{i}", lambda: np.array("R65_FLAG" in os.environ))
