# Review 63 (libcall2): library functions that write library/process state while traced (np.seterrcall, np.random.seed, struct.pack_into): never reused since.
import math


def f1(a):
    np.seterrcall(math.floor)
    return a + 1


def f2(a):
    np.random.seed(7)
    return a + 2


for step in range(2):
    np.seterrcall(None)
    np.random.seed(1)
    show(f"errcall{step}", lambda: jax.jit(lambda a: f1(a))(x))
    show(f"errcall{step}-state", lambda: np.array([np.geterrcall() is None]))
for step in range(2):
    np.seterrcall(None)
    np.random.seed(1)
    show(f"seed{step}", lambda: jax.jit(lambda a: f2(a))(x))
    show(f"seed{step}-state", lambda: np.array([np.random.rand()]))
