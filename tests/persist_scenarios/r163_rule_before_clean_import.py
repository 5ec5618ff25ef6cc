# alone
# served (its first call, made before the registration)
# A program's import-logging finder runs while pallas is imported (no attested read of
# it); the program sets a rule for a primitive pallas made; a later clean JAX import
# would prove the program's rule pallas's own (review 163).
import os
import sys
from functools import partial

jax.jit(lambda v: v + 1)(x)  # (pcache has read JAX's tables)


class Log:  # (an import logger: finds nothing)
    seen = []

    def find_spec(self, name, path=None, target=None):
        self.seen.append(name)
        return None


sys.meta_path.insert(0, Log())
from jax._src.interpreters import ad
from jax._src.pallas import primitives as PP

sys.meta_path.pop(0)

if os.environ["PHASE"] == "A":
    ad.defjvp_zero(PP.multiple_of_p)
else:
    ad.primitive_jvps[PP.multiple_of_p] = partial(ad.linear_jvp, PP.multiple_of_p)
import jax.experimental.ode  # (a JAX module imported with no program code run)


def f(v):
    return (PP.multiple_of_p.bind(v * v, values=(1,))).sum()


show("jvp", lambda: jax.jit(lambda v: jax.jvp(f, (v,), (jnp.ones_like(v),))[1])(x))
