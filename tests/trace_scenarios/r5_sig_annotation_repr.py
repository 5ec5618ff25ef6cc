import inspect


class Unit:
    def __init__(self, k):
        self.k = k

    def __repr__(self):
        return "Unit"


def mk(sig):
    return jax.jit(lambda v: v * sig.parameters["v"].annotation.k)


def sig_of(k):
    return inspect.Signature(
        [inspect.Parameter("v", inspect.Parameter.POSITIONAL_ONLY, annotation=Unit(k))]
    )


show("k=2", lambda: mk(sig_of(2.0))(x))
show("k=3", lambda: mk(sig_of(3.0))(x))

big = np.zeros(100000, np.float32)


def mk2(sig):
    return jax.jit(lambda v: v * sig.return_annotation[50000])


show("big=0", lambda: mk2(inspect.Signature(return_annotation=big.copy()))(x))
big[50000] = 5.0
show("big=5", lambda: mk2(inspect.Signature(return_annotation=big.copy()))(x))
