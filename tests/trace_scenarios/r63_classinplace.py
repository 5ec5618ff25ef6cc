# Review 63 (classinplace): a class body applies an in-place operator to a class-local name bound to a library dict (STORE_NAME): never reused since.
def f(a):
    class K:
        tc = np.typecodes
        tc |= {"Extra": tc.get("Extra", "") + "x"}

    return a * len(np.typecodes["Extra"])


for step in range(3):
    show(f"s{step}", lambda: jax.jit(lambda a: f(a))(x))
