# Review 27 (exc_reraise): a false hit of snapshot 6ba78e3 (the exception being handled, contextvars, signal handlers), refused since.
def mk():
    def f(x):
        try:
            raise
        except ValueError:
            return x * 2.0
        except RuntimeError:
            return x * 3.0

    return jax.jit(f)


show("a", lambda: mk()(x))
show("a2", lambda: mk()(x))
try:
    raise ValueError("v")
except ValueError:
    show("b", lambda: mk()(x))
