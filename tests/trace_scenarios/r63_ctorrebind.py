# Review 63 (ctorrebind): `self` rebound inside __init__ (a loop over other objects): still taken as the object under construction: never reused since.
import json


class Sep:
    def __init__(self, *targets):
        for self in targets:
            self.item_separator += ";"


def f(a):
    Sep(json.JSONEncoder)
    return a + 1


for step in range(3):
    mk = lambda: jax.jit(lambda a: f(a))
    show(f"s{step}", lambda: mk()(x))
    show(f"dump{step}", lambda: np.frombuffer(json.dumps([1, 2]).encode(), np.uint8))
