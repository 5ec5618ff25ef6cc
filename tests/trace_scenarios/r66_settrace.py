# Review 66 (settrace, in process): a trace function installed between two calls skips a line of the traced function: a user trace or profile function refuses.
import sys


def f(a):
    b = a * 2
    b = b + 1
    return b


first = f.__code__.co_firstlineno


def tracer(frame, event, arg):
    if frame.f_code is f.__code__:

        def local(frame, event, arg):
            if event == "line" and frame.f_lineno == first + 2:
                frame.f_lineno = first + 3
            return local

        return local
    return None


show("s1", lambda: jax.jit(lambda a: f(a))(x))
sys.settrace(tracer)
show("s2", lambda: jax.jit(lambda a: f(a))(x))
sys.settrace(None)
