# Review 63 (orwrite): an attribute store whose object is `lib or fresh`: only the last operand before the store is checked: never reused since.
import json


def f(a):
    d = {}
    (json.JSONEncoder or d).item_separator += ";"
    return a * len(json.dumps([1, 2]))


for step in range(3):
    show(f"s{step}", lambda: jax.jit(lambda a: f(a))(x))
