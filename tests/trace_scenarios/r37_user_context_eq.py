# Review 37 (userctx4): a user context holding a user object whose __eq__ says any two are equal: never reused since.
from jax._src import config as C


class K:
    def __init__(self, k):
        self.k = k

    def __eq__(self, o):
        return type(o) is K

    def __hash__(self):
        return 0


ctx = jax.make_user_context(None)
I = len(C.trace_context_names()) - 1
mk = lambda: jax.jit(lambda a: a * C.trace_context()[I].k)
for k in (1.0, 2.0):
    with ctx(K(k)):
        show(f"k{k}", lambda: mk()(x))
