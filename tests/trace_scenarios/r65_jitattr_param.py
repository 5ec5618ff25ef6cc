# Review 65 (jitattr_param): an attribute set on a global jit object, read through a parameter (f.scale) in a helper: never reused since.
JF = jax.jit(lambda a: a)


def helper(f, a):
    return a * f.scale


def body(a):
    return helper(JF, a)


mk = lambda: jax.jit(lambda a: body(a))
for v in (2.0, 3.0):
    JF.scale = v
    show(f"s{v}", lambda: mk()(x))
