# Review 63 (ctorsetattr2): minimal: a constructor setattr()s a library class while traced; the jit's own output shows it: never reused since.
import json


class Sep:
    def __init__(self, target):
        setattr(target, "item_separator", target.item_separator + ";")


def f(a):
    Sep(json.JSONEncoder)
    return a * len(json.dumps([1, 2]))


for step in range(3):
    mk = lambda: jax.jit(lambda a: f(a))
    show(f"s{step}", lambda: mk()(x))
