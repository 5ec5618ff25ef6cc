# Review 65 (match_or_environ): `env |= {...}` on os.environ bound by a match or-pattern's `as`; the program unsets it between steps: never reused since.
import os


def body(a):
    match os.environ:
        case dict() | os._Environ() as env:
            env |= {"R65_FLAG": "1"}
    return a + 1


mk = lambda: jax.jit(lambda a: body(a))
for i in range(2):
    os.environ.pop("R65_FLAG", None)
    show(f"s{i}", lambda: mk()(x))
    show(f"e{i}", lambda: np.array("R65_FLAG" in os.environ))
