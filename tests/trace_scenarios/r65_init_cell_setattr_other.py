# Review 65 (init_cell_setattr_other): an __init__ whose self is captured by a nested function: its setattr of another object goes unseen: never reused since.
import json


class C:
    def __init__(self, sep):
        setattr(json.JSONEncoder, "item_separator", sep)
        check = lambda: self


def body(a):
    C(";")
    return a + 1


mk = lambda: jax.jit(lambda a: body(a))
for i in range(2):
    json.JSONEncoder.item_separator = ", "
    show(f"s{i}", lambda: mk()(x))
    show(f"j{i}", lambda: np.array(json.dumps([1, 2])))
