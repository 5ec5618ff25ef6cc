"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""

# typing.get_type_hints evaluates string annotations in the function's globals.
import typing


class Two:
    k = 2.0


class Three:
    k = 3.0


Scale = Two


def helper(v: "Scale"):
    return v


mk = lambda: jax.jit(lambda v: v * typing.get_type_hints(helper)["v"].k)
show("2", lambda: mk()(x))
Scale = Three
show("3", lambda: mk()(x))
