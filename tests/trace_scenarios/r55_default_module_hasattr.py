# Review 55 (default_module_hasattr): a library package held as a default, asked whether a submodule is loaded: a module value is keyed with its names since.
import encodings


def mk():
    def f(a, m=encodings):
        return a * (2.0 if hasattr(m, "cp1140") else 3.0)

    return jax.jit(f)


show("s1", lambda: mk()(x))
import encodings.cp1140  # noqa: E402,F401

show("s2", lambda: mk()(x))
