# Review 59 (a library-held dict mutated through the unbound builtin method dict.update (no local, no alias)): a library dict mutated through the unbound method dict.update: a mutator called on a class is a write since.
def mk():
    def f(a):
        dict.update(np.sctypeDict, {"r59fw06": np.float16})
        return a * 2

    return jax.jit(f)


for i in range(3):
    np.sctypeDict.pop("r59fw06", None)
    show(f"r{i}", lambda: mk()(x))
    show(f"dt{i}", lambda: np.zeros(1, dtype="r59fw06"))
