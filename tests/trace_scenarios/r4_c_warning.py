"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

import warnings

big = np.float32(1e30)
mk = lambda: jax.jit(lambda v: v * float(big * big > 0))
for i in range(3):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        show(f"step{i}", lambda: mk()(x))
    print("warnings", i, [str(m.category.__name__) for m in w])
