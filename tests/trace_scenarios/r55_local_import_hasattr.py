# Review 55 (local_import_hasattr): hasattr of a library submodule, the package bound by an import inside the function: its names are guarded since.
def mk():
    def f(a):
        import encodings

        return a * (2.0 if hasattr(encodings, "cp500") else 3.0)

    return jax.jit(f)


show("s1", lambda: mk()(x))
import encodings.cp500  # noqa: E402,F401

show("s2", lambda: mk()(x))
