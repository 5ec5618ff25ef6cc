"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

LOG = []


def on_fp_error(kind, flag):
    LOG.append(kind)


np.seterrcall(on_fp_error)
np.seterr(all="call")
big = np.float32(1e30)
mk = lambda: jax.jit(lambda v: v * float(big * big > 0))
for i in range(3):
    show(f"step{i}", lambda: mk()(x))
    print("LOG len", len(LOG))
np.seterr(all="warn")
