# Review 65 (deepcopy_memo): copy.deepcopy writes its memo argument; the memo is a dict a library module holds: never reused since.
import copy, json.decoder as D


def body(a):
    copy.deepcopy([1.0], D.BACKSLASH)
    return a + 1


mk = lambda: jax.jit(lambda a: body(a))
for i in range(3):
    show(f"s{i}", lambda: mk()(x))
    show(f"n{i}", lambda: np.array(len(D.BACKSLASH.get(id(D.BACKSLASH), []))))
