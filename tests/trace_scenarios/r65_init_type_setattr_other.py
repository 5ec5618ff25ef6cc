# Review 65 (init_type_setattr_other): __init__ calls type.__setattr__ on another object (json.JSONEncoder) rather than on self: never reused since.
import json


class C:
    def __init__(self, sep):
        type.__setattr__(json.JSONEncoder, "item_separator", sep)


def body(a):
    C(";")
    return a + 1


mk = lambda: jax.jit(lambda a: body(a))
for i in range(2):
    json.JSONEncoder.item_separator = ", "
    show(f"s{i}", lambda: mk()(x))
    show(f"j{i}", lambda: np.array(json.dumps([1, 2])))
