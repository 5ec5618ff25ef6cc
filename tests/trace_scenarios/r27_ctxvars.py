# Review 27 (ctxvars): a false hit of snapshot 6ba78e3 (the exception being handled, contextvars, signal handlers), refused since.
import contextvars

CV = contextvars.ContextVar("scale", default=None)


def mk():
    def f(x):
        s = 1.0
        for v in contextvars.copy_context().values():
            if isinstance(v, float):
                s = s * v
        return x * s

    return jax.jit(f)


CV.set(2.0)
show("a", lambda: mk()(x))
show("a2", lambda: mk()(x))
CV.set(5.0)
show("b", lambda: mk()(x))
