# A helper that happens to be named __hash__ may call id(): the `id()`/`hash()` ban
# (guards_for: `hashing`) is lifted for any code object named __hash__. Here id()
# makes an identity test against a code constant: 1000 from this module's constants
# is the very object in __hash__'s code, int("1000") is not. Keys: equal ints.
def __hash__(v):
    return id(v) == id(1000)


mk = lambda k: jax.jit(lambda x: x * (2.0 if __hash__(k) else 3.0))
show("const", lambda: mk(1000)(x))
show("computed", lambda: mk(int("1000"))(x))
