DEFAULT_MODE = "".join(["tr", "ain"])  # a str object of its own (not interned)


def mk(mode):
    return jax.jit(lambda v: v * (2.0 if mode is DEFAULT_MODE else 3.0))


show("alias", lambda: mk(DEFAULT_MODE)(x))
show("equal str", lambda: mk("".join(["tra", "in"]))(x))

BIG = 10**20


def mk2(n):
    return jax.jit(lambda v: v * (2.0 if n is BIG else 3.0))


show("alias int", lambda: mk2(BIG)(x))
show("equal int", lambda: mk2(int("1" + "0" * 20))(x))
F = float("1.5")


def mk3(f):
    return jax.jit(lambda v: v * (2.0 if f is F else 3.0))


show("alias float", lambda: mk3(F)(x))
show("equal float", lambda: mk3(float("1.5"))(x))
mk4 = lambda: jax.jit(lambda v, mode: v * (2.0 if mode is DEFAULT_MODE else 3.0), static_argnums=1)
show("static alias", lambda: mk4()(x, DEFAULT_MODE))
show("static equal str", lambda: mk4()(x, "".join(["tra", "in"])))
