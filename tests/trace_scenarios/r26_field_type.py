# Review 26 (field_type): a false hit of snapshot 6ba78e3, refused since (imports, library modules reaching user state, the stdlib allowlist, __file__, Field kinds).
import dataclasses

F = dataclasses.field(default=1.0)


def mk():
    fld = F

    def f(x):
        ft = fld._field_type
        return x * (1.0 if ft is None else float(len(ft.name)))

    return jax.jit(f)


for i in range(2):
    show(f"s{i}", lambda: mk()(x))
    F._field_type = dataclasses._FIELD_CLASSVAR
