# `k is (1000 if c else None)`: the operand just before IS_OP is LOAD_CONST None (the
# else branch), so _singleton_test takes it for `k is None`; with c true it is an
# identity test against the code constant 1000 (the same object as this module's
# 1000; int("1000") is not). Equal ints: equal keys.
mk = lambda k, c: jax.jit(lambda x: x * (2.0 if k is (1000 if c else None) else 3.0))
show("const", lambda: mk(1000, True)(x))
show("computed", lambda: mk(int("1000"), True)(x))
