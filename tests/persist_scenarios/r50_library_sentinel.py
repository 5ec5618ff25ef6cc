# Review 50 (sent1): a library's object() sentinel (A) vs a program's own object() under the same user name (B): a sentinel a library holds is named by the library.
import os

if os.environ["PHASE"] == "A":
    from jax._src.lax.control_flow.conditionals import _no_operand_sentinel as S
else:
    S = object()


def f(a):
    return jax.lax.cond(True, lambda *o: a * (len(o) + 2.0), lambda *o: a * 7.0, operand=S)


show("sent", lambda: jax.jit(f)(x))
