"""Reflection with a computed name through APIs other than getattr."""

import operator

S = 2.0


def helper():
    pass


def name():
    return "".join(("__glob", "als__"))


fs = {
    "object.__getattribute__": lambda: jax.jit(
        lambda v: v * object.__getattribute__(helper, name())["S"]
    ),
    "fn.__getattribute__": lambda: jax.jit(lambda v: v * helper.__getattribute__(name())["S"]),
    "operator.attrgetter": lambda: jax.jit(lambda v: v * operator.attrgetter(name())(helper)["S"]),
    "str.format": lambda: jax.jit(lambda v: v * float(("{0." + name() + "[S]}").format(helper))),
}
for k, mk in fs.items():
    show(k + " S=2", lambda: mk()(x))
S = 3.0
for k, mk in fs.items():
    show(k + " S=3", lambda: mk()(x))
