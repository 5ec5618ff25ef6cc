# Review 61 (w11_staticmethod_counter_value): w5 with the count the write makes flowing into the traced value (a trace counter kept in a library dict): a write through it is never reused since.
class Util:
    @staticmethod
    def bump(registry, key):
        registry.update({key: registry.get(key, "") + "x"})
        return len(registry[key])


def mk():
    def f(a):
        return a * Util.bump(np.typecodes, "traces")

    return jax.jit(f)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
