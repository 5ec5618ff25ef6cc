# Review 63 (orwrite2): item store and container method whose object is `lib if c else fresh`: only the fresh branch is checked: never reused since.
def f(a):
    d = {}
    (np.typecodes if a.ndim else d)["Extra"] = np.typecodes.get("Extra", "") + "x"
    (np.typecodes if a.ndim else d).update(Extra2=np.typecodes.get("Extra2", "") + "y")
    return a * len(np.typecodes["Extra"]) + len(np.typecodes["Extra2"])


for step in range(3):
    show(f"s{step}", lambda: jax.jit(lambda a: f(a))(x))
