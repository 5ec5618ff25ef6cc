# Review 65 (new_setattr_other): a user class's __new__ (a constructor) setattr's another object: json.JSONEncoder's class attribute: never reused since.
import json


class C:
    def __new__(cls, sep):
        setattr(json.JSONEncoder, "item_separator", sep)
        return object.__new__(cls)


def body(a):
    C(";")
    return a + 1


mk = lambda: jax.jit(lambda a: body(a))
for i in range(2):
    json.JSONEncoder.item_separator = ", "
    show(f"s{i}", lambda: mk()(x))
    show(f"j{i}", lambda: np.array(json.dumps([1, 2])))
