"""A reflective format string held as bytes (a code constant, a numpy bytes array):
the string checks look at str only."""

S = 2.0


def helper():
    pass


FMT_NP = np.array([b"{0.__globals__[S]}"])
fs = {
    "bytes literal": lambda: jax.jit(
        lambda v: v * float(b"{0.__globals__[S]}".decode().format(helper))
    ),
    "numpy bytes": lambda: jax.jit(lambda v: v * float(FMT_NP[0].decode().format(helper))),
}
for k, mk in fs.items():
    show(k + " S=2", lambda: mk()(x))
S = 3.0
for k, mk in fs.items():
    show(k + " S=3", lambda: mk()(x))
