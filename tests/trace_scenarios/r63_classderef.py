# Review 63 (classderef): a class body writes an attribute through the enclosing function's own cell (LOAD_CLASSDEREF): never reused since.
import json


def f(a):
    enc = json.JSONEncoder

    class K:
        enc.item_separator += ";"

    return a * len(json.dumps([1, 2]))


for step in range(3):
    show(f"s{step}", lambda: jax.jit(lambda a: f(a))(x))
