# Review 65 (match_or_inplace): an in-place operator on a local bound by a match or-pattern's `as` (a library-held array): never reused since.
import numpy.polynomial.polynomial as P


def body(a):
    match P.polydomain:
        case list() | np.ndarray() as arr:
            arr /= 2
    return a + 1


mk = lambda: jax.jit(lambda a: body(a))
for i in range(3):
    show(f"s{i}", lambda: mk()(x))
    show(f"d{i}", lambda: P.polydomain.copy())
