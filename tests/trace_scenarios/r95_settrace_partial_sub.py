# Review 95 (hooks): a sys.settrace function that is a program's subclass of
# functools.partial; its __call__ skips a line of the traced function when G says so.
import functools, sys, operator

G = 0


def body(a):
    s = 2.0
    s = 3.0
    return a * s


SKIP = body.__code__.co_firstlineno + 2  # the line "s = 3.0"


class P(functools.partial):
    def __call__(self, frame, event, arg):
        if frame.f_code is not body.__code__:
            return None
        if event == "line" and G and frame.f_lineno == SKIP:
            frame.f_lineno = SKIP + 1
        return self


sys.settrace(P(operator.add))
mk = lambda: jax.jit(lambda a: body(a))
for i in range(4):
    G = i % 2
    show(f"s{i}", lambda: mk()(x))
sys.settrace(None)
