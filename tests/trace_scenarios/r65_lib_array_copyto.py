# Review 65 (lib_array_copyto): trace-time np.copyto into an array a library module holds (numpy.polynomial's polydomain): never reused since.
import numpy.polynomial.polynomial as P


def body(a):
    np.copyto(P.polydomain, P.polydomain * 2)
    return a + 1


mk = lambda: jax.jit(lambda a: body(a))
for i in range(3):
    show(f"s{i}", lambda: mk()(x))
    show(f"d{i}", lambda: P.polydomain.copy())
