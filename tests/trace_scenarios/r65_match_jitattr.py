# Review 65 (match_jitattr): an attribute set on a global jit object, read by a match class pattern instead of JF.scale: never reused since.
JF = jax.jit(lambda a: a)


def body(a):
    match JF:
        case object(scale=s):
            return a * s
    return a


mk = lambda: jax.jit(lambda a: body(a))
for v in (2.0, 3.0):
    JF.scale = v
    show(f"s{v}", lambda: mk()(x))
