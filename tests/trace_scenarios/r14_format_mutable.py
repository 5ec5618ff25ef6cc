# LIBRARY_VALUES keyed by __eq__: a global Format (slots layout/sharding, writable)
# mutated in place; the value guard compares the pinned object with itself.
from jax.experimental.layout import Format, Layout
from jax.sharding import SingleDeviceSharding

s = SingleDeviceSharding(jax.devices()[0])
FMT = Format(Layout((0,)), s)


def mk():
    return jax.jit(lambda x: x * (FMT.layout.sub_byte_element_size_in_bits + 1.0))


show("a", lambda: mk()(x))
FMT.layout = Layout((0,), sub_byte_element_size_in_bits=4)
show("b", lambda: mk()(x))
