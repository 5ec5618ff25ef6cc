# Review 66 (settrace): B installs a sys.settrace function that skips a line of the traced function: a user trace or profile function refuses since.
import os, sys


def f(a):
    b = a * 2
    b = b + 1
    return b


if os.environ["PHASE"] == "B":
    first = f.__code__.co_firstlineno

    def tracer(frame, event, arg):
        if frame.f_code is f.__code__:

            def local(frame, event, arg):
                if event == "line" and frame.f_lineno == first + 2:
                    frame.f_lineno = first + 3
                return local

            return local
        return None

    sys.settrace(tracer)
show("p1", lambda: jax.jit(f)(x))
sys.settrace(None)
