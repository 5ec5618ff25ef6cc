from importlib import import_module
from pkgutil import resolve_name
from pickle import loads
import operator

S = 2.0
G = globals
EV = eval
FMT = "{0.__globals__[S]}"
AG = operator.attrgetter("__globals__")


def helper():
    pass


fs = {
    "G=globals": lambda: jax.jit(lambda v: v * G()["S"]),
    "EV=eval": lambda: jax.jit(lambda v: v * EV("S")),
    "import_module": lambda: jax.jit(lambda v: v * import_module("__main__").S),
    "resolve_name": lambda: jax.jit(lambda v: v * resolve_name("__main__:S")),
    "pickle.loads": lambda: jax.jit(lambda v: v * loads(b"c__main__\nS\n.")),
    "FMT global": lambda: jax.jit(lambda v: v * float(FMT.format(helper))),
    "attrgetter global": lambda: jax.jit(lambda v: v * AG(helper)["S"]),
}
for k, mk in fs.items():
    show(k + " S=2", lambda: mk()(x))
S = 3.0
for k, mk in fs.items():
    show(k + " S=3", lambda: mk()(x))
GA = getattr
NAME = "__globals__"
S = 2.0
fs2 = {
    "GA alias + NAME": lambda: jax.jit(lambda v: v * GA(helper, NAME)["S"]),
    "attrgetter computed": lambda: jax.jit(
        lambda v: v * operator.attrgetter("__glob" + "als__")(helper)["S"]
    ),
}
for k, mk in fs2.items():
    show(k + " S=2", lambda: mk()(x))
S = 3.0
for k, mk in fs2.items():
    show(k + " S=3", lambda: mk()(x))
