# Review 65 (errcall_inner_errstate): a user numpy error callback set outside the trace; the trace enters np.errstate(all="call") itself: never reused since.
STRICT = False


def handler(kind, flag):
    if STRICT:
        raise ValueError(kind)


np.seterrcall(handler)


def body(a):
    try:
        with np.errstate(all="call"):
            np.float64(1.0) / np.float64(0.0)
        v = 1.0
    except ValueError:
        v = 2.0
    return a * v


mk = lambda: jax.jit(lambda a: body(a))
for s in (False, True):
    STRICT = s
    show(f"strict={s}", lambda: mk()(x))
