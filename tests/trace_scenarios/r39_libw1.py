# Review 39 (libw1): a library module's attribute written while tracing through a local alias (m = M; m.CNT = ...): the namespace of every library module the code reads is checked after the trace since.
import fractions as M

M.CNT = 1.0


def f(x):
    m = M
    m.CNT = m.CNT + 1.0
    return x * m.CNT


mk = lambda: jax.jit(lambda x: f(x))
for i in range(3):
    show(f"s{i}", lambda: mk()(x))
del M.CNT
