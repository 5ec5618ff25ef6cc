# Review 63 (classbody): a class body (LOAD_NAME) rebinds a name that is a library module globally to a library dict, then calls update on it: never reused since.
def f(a):
    class K:
        np = np.typecodes
        np.update(Extra=np.get("Extra", "") + "x")

    return a + 1


for step in range(3):
    show(f"s{step}", lambda: jax.jit(lambda a: f(a))(x))
    show(f"state{step}", lambda: np.array([len(np.typecodes.get("Extra", ""))]))
