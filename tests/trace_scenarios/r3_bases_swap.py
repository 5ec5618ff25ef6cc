"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""

# A user class's library bases are not in its key: __bases__ reassigned.
import http.server as hs


class H(hs.BaseHTTPRequestHandler):
    pass


mk = lambda: jax.jit(lambda v: v * len(H.server_version))
show("base", lambda: mk()(x))
H.__bases__ = (hs.SimpleHTTPRequestHandler,)
show("simple", lambda: mk()(x))
