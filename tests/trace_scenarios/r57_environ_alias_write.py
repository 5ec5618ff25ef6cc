# Review 57 (env_write_alias): a trace-time write to os.environ through a local alias: never reused since.
import os


def f(a):
    env = os.environ
    env["R57_MODE"] = "traced"
    return a * 2.0


mk = lambda: jax.jit(lambda a: f(a))
show("s1", lambda: mk()(x))
show("s1b", lambda: mk()(x))
os.environ["R57_MODE"] = "reset"
show("s2", lambda: mk()(x))
show("env", lambda: np.frombuffer(os.environ["R57_MODE"].encode(), np.uint8))
