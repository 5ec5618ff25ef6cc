# Review 63 (postinit1): an explicit __post_init__ call on a library class: `self` taken as the object under construction: never reused since.
import json


class C:
    def __post_init__(self):
        self.item_separator += ";"


def f(a):
    C.__post_init__(json.JSONEncoder)
    return a + 1


for step in range(3):
    mk = lambda: jax.jit(lambda a: f(a))
    show(f"s{step}", lambda: mk()(x))
    show(f"dump{step}", lambda: np.frombuffer(json.dumps([1, 2]).encode(), np.uint8))
