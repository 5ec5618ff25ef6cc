# Review 27 (signal_handler): a false hit of snapshot 6ba78e3 (the exception being handled, contextvars, signal handlers), refused since.
import signal


def mk():
    def f(a):
        h = signal.getsignal(signal.SIGUSR1)
        return a * (h(0, None) if callable(h) else 1.0)

    return jax.jit(f)


show("a", lambda: mk()(x))
show("a2", lambda: mk()(x))
signal.signal(signal.SIGUSR1, lambda s, fr: 4.0)
show("b", lambda: mk()(x))
