# A bound builtin method is keyed by (name, type(bound), bound), not by WHICH class's
# implementation is bound: int.__repr__ bound to True vs True's own bool.__repr__
# (also: float.__repr__.__get__(np.float64(1.5)) vs np.float64(1.5).__repr__).
mk = lambda r: jax.jit(lambda x: x * len(r()))
show("bool_repr", lambda: mk(True.__repr__)(x))  # "True" -> 4
show("int_repr", lambda: mk(int.__repr__.__get__(True))(x))  # "1"    -> 1
v = np.float64(1.5)
show("np_repr", lambda: mk(v.__repr__)(x))  # "np.float64(1.5)"
show("float_repr", lambda: mk(float.__repr__.__get__(v))(x))  # "1.5"
