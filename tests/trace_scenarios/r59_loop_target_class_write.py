# Review 59 (a library class from a global chain bound by a for target; its class attribute written): a library class bound by a for target, its class attribute written: never reused since.
import json


def mk():
    def f(a):
        for k in (json.JSONEncoder,):
            k.item_separator = ";"
        return a * 2

    return jax.jit(f)


for i in range(3):
    json.JSONEncoder.item_separator = ","
    show(f"r{i}", lambda: mk()(x))
    show(f"sep{i}", lambda: np.frombuffer(json.JSONEncoder.item_separator.encode(), np.uint8))
