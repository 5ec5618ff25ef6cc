# Review 63 (initheld): a user class's __init__ held as a module global and called on a library class while traced: its `self` is not the object under construction: never reused since.
import json


class Sep:
    def __init__(self):
        self.item_separator += ";"


INIT = Sep.__init__


def f(a):
    INIT(json.JSONEncoder)
    return a * len(json.dumps([1, 2]))


for step in range(3):
    show(f"s{step}", lambda: jax.jit(lambda a: f(a))(x))
