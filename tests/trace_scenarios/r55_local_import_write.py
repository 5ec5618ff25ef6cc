# Review 55 (local_import_write): the trace writes an attribute of a library module bound by an import inside the function: its namespace is checked after the trace since.
import json

json.CNT_R55 = 0


def mk():
    def f(a):
        import json as c

        c.CNT_R55 = c.CNT_R55 + 1
        return a * c.CNT_R55

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("cnt", lambda: np.float32(json.CNT_R55))
