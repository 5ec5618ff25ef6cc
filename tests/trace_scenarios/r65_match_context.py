# Review 65 (match_context): the exception being handled when the jit is called, read by a match class pattern (__context__): never reused since.
def body(a):
    try:
        raise KeyError("inner")
    except KeyError as e:
        match e:
            case KeyError(__context__=ValueError(args=(v,))):
                return a * v
    return a


mk = lambda: jax.jit(lambda a: body(a))
for v in (2.0, 3.0, 4.0):
    try:
        raise ValueError(v)
    except ValueError:
        show(f"s{v}", lambda: mk()(x))
