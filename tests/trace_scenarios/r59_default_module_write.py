# Review 59 (a library module held in a default argument, an existing attribute rebound while traced): a library module held in a default argument, an existing attribute rebound through the parameter while traced: a write through a local that is neither built in the frame nor self is never reused since.
import textwrap

textwrap.LAST = 0.0


def mk():
    def f(a, m=textwrap):
        m.LAST = 5.0  # write through a parameter (default: a library module)
        return a * 2

    return jax.jit(f)


for i in range(3):
    textwrap.LAST = 0.0
    show(f"r{i}", lambda: mk()(x))
    show(f"LAST{i}", lambda: np.float32(textwrap.LAST))
