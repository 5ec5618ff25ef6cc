# A class of logging.config (which resolves dotted names) read as a global: refused.
from logging.config import BaseConfigurator

SCALE = 1.0
mk = lambda: jax.jit(lambda v: v * BaseConfigurator({}).resolve("__main__.SCALE"))
show("s1", lambda: mk()(x))
SCALE = 5.0
show("s5", lambda: mk()(x))
