# Review 38 (fs_order): a false hit of persisted traces at ecaba96, fixed since.
import os

_order = "0, 8, 16" if os.environ.get("PHASE") == "A" else "16, 8, 0"
exec(f"""
def f(a):
    acc = 0
    for i in {{{_order}}}:
        acc = acc * 100 + i
    return a * acc
""")
show("fs", lambda: jax.jit(f)(x))
