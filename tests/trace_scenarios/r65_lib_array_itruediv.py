# Review 65 (lib_array_itruediv): trace-time in-place dunder not on the mutator list, on a library-held array: never reused since.
import numpy.polynomial.polynomial as P


def body(a):
    P.polydomain.__itruediv__(2.0)
    return a + 1


mk = lambda: jax.jit(lambda a: body(a))
for i in range(3):
    show(f"s{i}", lambda: mk()(x))
    show(f"d{i}", lambda: P.polydomain.copy())
