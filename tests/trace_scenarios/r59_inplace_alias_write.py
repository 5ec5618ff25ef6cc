# Review 59 (in-place operator through a tracked alias of a library-held mapping (env |= {...})): an in-place operator through an alias of os.environ (env |= {...}): a write since.
import os


def mk():
    def f(a):
        env = os.environ
        env |= {"PCACHE_R59_K": "1"}
        return a * 2

    return jax.jit(f)


for i in range(3):
    os.environ.pop("PCACHE_R59_K", None)
    show(f"r{i}", lambda: mk()(x))
    show(f"set{i}", lambda: np.int8("PCACHE_R59_K" in os.environ))
