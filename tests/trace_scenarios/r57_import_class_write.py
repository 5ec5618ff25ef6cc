# Review 57 (imp_write_cls): a trace-time write to a library class attribute through an imported module: never reused since.
import json


def f(a):
    import json

    json.JSONEncoder.item_separator = ";"
    return a * 2.0


mk = lambda: jax.jit(lambda a: f(a))
show("s1", lambda: mk()(x))
show("s1b", lambda: mk()(x))
json.JSONEncoder.item_separator = ","
show("s2", lambda: mk()(x))
show("dumps", lambda: np.frombuffer(json.JSONEncoder().encode([1, 2]).encode(), np.uint8))
