# Review 27 (exc_context): a false hit of snapshot 6ba78e3 (the exception being handled, contextvars, signal handlers), refused since.
def mk():
    def f(x):
        try:
            raise KeyError("k")
        except KeyError as e:
            c = e.__context__
        return x * (2.0 if isinstance(c, ValueError) else 3.0)

    return jax.jit(f)


show("a", lambda: mk()(x))
show("a2", lambda: mk()(x))
try:
    raise ValueError("v")
except ValueError:
    show("b", lambda: mk()(x))
