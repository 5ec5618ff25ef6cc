# Review 65 (init_setattr_selfattr): __init__: setattr(self.t, ...) where self.t is another object (json.JSONEncoder) passed in: never reused since.
import json


class C:
    def __init__(self, target, sep):
        self.t = target
        setattr(self.t, "item_separator", sep)


def body(a):
    C(json.JSONEncoder, ";")
    return a + 1


mk = lambda: jax.jit(lambda a: body(a))
for i in range(2):
    json.JSONEncoder.item_separator = ", "
    show(f"s{i}", lambda: mk()(x))
    show(f"j{i}", lambda: np.array(json.dumps([1, 2])))
