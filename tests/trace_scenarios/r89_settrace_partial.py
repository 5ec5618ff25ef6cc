# Review 89 (trace function, partial): sys.settrace(functools.partial(tracer)), whose
# tracer rewrites a local of the traced code from a global.
import functools
import sys

SCALE = 2.0


def local_tracer(frame, event, arg):
    if event == "line" and "k" in frame.f_locals:
        frame.f_locals["k"] = SCALE
    return local_tracer


def tracer(frame, event, arg):
    return local_tracer if frame.f_code.co_name == "body" else None


def body(a):
    k = 1.0
    return a * k


mk = lambda: jax.jit(lambda a: body(a))
saved = sys.gettrace()
sys.settrace(functools.partial(tracer))
try:
    for i in range(5):
        SCALE = float(i + 2)
        show(f"s{i}", lambda: mk()(x))
finally:
    sys.settrace(saved)
