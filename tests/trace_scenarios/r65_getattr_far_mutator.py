# Review 65 (getattr_far_mutator): getattr(<long attribute chain>, "fill")(v): the constant mutator name is more than 6 instructions after getattr: never reused since.
import numpy.polynomial.polynomial


def helper(m, v):
    getattr(m.polynomial.polynomial.polydomain.T.T, "fill")(v)


def body(a):
    helper(np, 7.0)
    return a + 1


mk = lambda: jax.jit(lambda a: body(a))
P = np.polynomial.polynomial
for i in range(2):
    P.polydomain[:] = (-1.0, 1.0)
    show(f"s{i}", lambda: mk()(x))
    show(f"d{i}", lambda: P.polydomain.copy())
