# `type(a) is b` passes the scan as a class test (_a_class: LOAD_GLOBAL type, CALL);
# with a module-level helper named `type` it is an identity test of a captured int
# against a code constant (1000 from this module's constants is the same object in
# both code objects; int("1000") is not). The ints are keyed by value: equal keys.
def type(v):
    return v


mk = lambda k: jax.jit(lambda x: x * (2.0 if type(k) == 1000 else 3.0))
show("const", lambda: mk(1000)(x))
show("computed", lambda: mk(int("1000"))(x))
