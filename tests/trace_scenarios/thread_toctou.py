"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

import time, threading

S = 2.0
mk = lambda: jax.jit(lambda v: v * (time.sleep(0.5) or S))


def other():
    global S
    time.sleep(0.2)
    S = 3.0


th = threading.Thread(target=other)
th.start()
show("S changes 2->3 during trace", lambda: mk()(x))
th.join()
S = 2.0
show("S=2", lambda: mk()(x))
