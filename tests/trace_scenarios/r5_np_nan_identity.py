NAN = np.float32("nan")


def mk(vals):
    return jax.jit(lambda v: v * (2.0 if NAN in vals else 3.0))


show("same-obj", lambda: mk([NAN])(x))
show("other-obj", lambda: mk([np.float32("nan")])(x))
CN = complex("nan+0j")


def mk2(vals):
    return jax.jit(lambda v: v * (2.0 if CN in vals else 3.0))


show("c same-obj", lambda: mk2([CN])(x))
show("c other-obj", lambda: mk2([complex("nan+0j")])(x))
