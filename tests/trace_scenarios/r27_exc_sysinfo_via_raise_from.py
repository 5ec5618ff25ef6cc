# Review 27 (exc_sysinfo_via_raise_from): a false hit of snapshot 6ba78e3 (the exception being handled, contextvars, signal handlers), refused since.
# exception-state via 'with' of a context manager whose __exit__ gets the exc? use bare raise in helper
def helper():
    raise


def mk():
    def f(x):
        try:
            helper()
        except LookupError:
            return x * 2.0
        except RuntimeError:
            return x * 3.0

    return jax.jit(f)


show("a", lambda: mk()(x))
show("a2", lambda: mk()(x))
try:
    {}["z"]
except KeyError:
    show("b", lambda: mk()(x))
