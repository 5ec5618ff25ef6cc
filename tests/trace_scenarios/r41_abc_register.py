# Review 41 (abc_reg_inproc): a library class registered on a library ABC between steps (isinstance answers otherwise): ABCMeta's registration counter is in the host key since.
import collections.abc

G = slice(1, 2)


def make():
    def f(a):
        return a * (2.0 if isinstance(G, collections.abc.Set) else 3.0)

    return f


show("before", lambda: jax.jit(make())(x))
show("before2", lambda: jax.jit(make())(x))
collections.abc.Set.register(slice)
show("after", lambda: jax.jit(make())(x))
