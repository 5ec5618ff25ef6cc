# Review 53 (stacksize): threading.stack_size() read while tracing: threading is off the plain stdlib since.
# threading.stack_size() (threading is on PLAIN_STDLIB) read at trace time
import threading

mk = lambda: jax.jit(lambda a: a * (1.0 + (threading.stack_size() > 0)))
show("s1", lambda: mk()(x))
threading.stack_size(1 << 20)
show("s2", lambda: mk()(x))
threading.stack_size(0)
