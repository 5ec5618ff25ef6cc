# Review 63 (ctorselfattr): a constructor keeps a reference to an existing (library) object on self, then writes through self.<attr>: never reused since.
import json


class Sep:
    def __init__(self, target):
        self.t = target
        self.t.item_separator += ";"


def f(a):
    Sep(json.JSONEncoder)
    return a + 1


for step in range(3):
    mk = lambda: jax.jit(lambda a: f(a))
    show(f"s{step}", lambda: mk()(x))
    show(f"dump{step}", lambda: np.frombuffer(json.dumps([1, 2]).encode(), np.uint8))
