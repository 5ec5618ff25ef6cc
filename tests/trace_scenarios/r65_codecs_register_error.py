# Review 65 (codecs_register_error): codecs.register_error called while traced (sets interpreter state later code reads); the program re-registers between steps: never reused since.
import codecs


def ha(e):
    return ("A", e.end)


def hb(e):
    return ("B", e.end)


def body(a):
    codecs.register_error("r65", ha)
    return a + 1


mk = lambda: jax.jit(lambda a: body(a))
for i in range(2):
    codecs.register_error("r65", hb)
    show(f"s{i}", lambda: mk()(x))
    show(f"c{i}", lambda: np.array(b"\xff".decode("ascii", "r65")))
