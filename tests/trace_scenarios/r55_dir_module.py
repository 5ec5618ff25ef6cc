# Review 55 (dir_module): dir() of a library package, which a submodule's import adds to: dir is never reused since.
import encodings

mk = lambda: jax.jit(lambda a: a * len(dir(encodings)))
show("s1", lambda: mk()(x))
import encodings.cp037  # noqa: E402,F401

show("s2", lambda: mk()(x))
