# LIBRARY_VALUES (Layout, Format, ...) are keyed by their own __eq__ and pinned:
# jax's Layout is a plain mutable class, so mutating a captured Layout in place
# leaves the key "equal" (same object) and the stale trace is reused.
from jax.experimental.layout import Layout

lay = Layout((0,))
mk = lambda: jax.jit(lambda x: x * (lay.sub_byte_element_size_in_bits + 1.0))
show("a", lambda: mk()(x))
lay.sub_byte_element_size_in_bits = 4
show("b", lambda: mk()(x))
