# Review 59 (os.environ bound by tuple unpacking (not a plain alias), an item written while traced): os.environ bound by tuple unpacking, an item written while traced: a subscript store needs a container built in the frame since.
import os


def mk():
    def f(a):
        env, _ = os.environ, 0
        env["PCACHE_R59_K"] = "1"
        return a * 2

    return jax.jit(f)


for i in range(3):
    os.environ.pop("PCACHE_R59_K", None)
    show(f"r{i}", lambda: mk()(x))
    show(f"set{i}", lambda: np.int8("PCACHE_R59_K" in os.environ))
