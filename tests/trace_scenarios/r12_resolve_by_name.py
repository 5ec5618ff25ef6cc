# Module state read by dotted name through a library function outside the refused
# modules (logging.config's BaseConfigurator.resolve: __import__ + getattr): no guard
# follows the read, and the callable is reused after the global changed.
import logging.config

SCALE = 1.0
mk = lambda: jax.jit(lambda v: v * logging.config.BaseConfigurator({}).resolve("__main__.SCALE"))
show("s1", lambda: mk()(x))
SCALE = 5.0
show("s5", lambda: mk()(x))
