# LIBRARY_VALUES keyed by __eq__: two fresh Layouts equal by Layout.__eq__ can
# hold different state (an attribute set on one: Layout has a __dict__).
from jax.experimental.layout import Layout


def mk(s):
    lay = Layout((0,))
    lay.scale = s
    return jax.jit(lambda x: x * lay.scale)


show("a", lambda: mk(2.0)(x))
show("b", lambda: mk(3.0)(x))
