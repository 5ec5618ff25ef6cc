# Review 65 (fmt_context): the exception being handled when the jit is called, read through a constant format string: never reused since.
def body(a):
    try:
        raise KeyError("inner")
    except KeyError as e:
        return a * float("{0.__context__.args[0]}".format(e))


mk = lambda: jax.jit(lambda a: body(a))
for v in (2.0, 3.0):
    try:
        raise ValueError(v)
    except ValueError:
        show(f"s{v}", lambda: mk()(x))
