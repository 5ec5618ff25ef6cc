"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""

# Trace-time warnings (JAX's own) are not issued again on a reuse.
import warnings

mk = lambda: jax.jit(lambda v: jnp.asarray(v, dtype=jnp.float64) * 2)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    for i in range(3):
        mk()(x)
        show(f"nwarn{i}", lambda: np.array(len(w)))
