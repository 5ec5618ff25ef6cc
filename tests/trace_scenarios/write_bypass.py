"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

import operator

cfg = {"n": 0}
mk = lambda: jax.jit(lambda v: v * (operator.setitem(cfg, "n", cfg["n"] + 1) or cfg["n"]))
for i in range(3):
    if i < 2:
        cfg["n"] = 0
    show(f"step{i}", lambda: mk()(x))
    print("  cfg", cfg)
