# Review 65 (fmt_jitattr): an attribute set on a global jit object, read through a constant format string's field: never reused since.
JF = jax.jit(lambda a: a)


def body(a):
    return a * float("{0.scale}".format(JF))


mk = lambda: jax.jit(lambda a: body(a))
for v in (2.0, 3.0):
    JF.scale = v
    show(f"s{v}", lambda: mk()(x))
