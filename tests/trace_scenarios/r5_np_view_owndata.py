BUF = np.arange(8, dtype=np.float32)


def mk(a):
    return jax.jit(lambda v: v * (2.0 if a.flags.owndata else 3.0))


show("copy", lambda: mk(BUF[:3].copy())(x))
show("view", lambda: mk(BUF[:3])(x))


def mk2(a):
    return jax.jit(lambda v: v * (2.0 if np.shares_memory(a, BUF) else 3.0))


show("view2", lambda: mk2(BUF[2:5])(x))
show("copy2", lambda: mk2(BUF[2:5].copy())(x))


def mk3(a):
    return jax.jit(lambda v: v * a.base[7])


big = np.arange(8, dtype=np.float32)
show("base7=7", lambda: mk3(big[:3])(x))
big[7] = 70.0
show("base7=70", lambda: mk3(big[:3])(x))
