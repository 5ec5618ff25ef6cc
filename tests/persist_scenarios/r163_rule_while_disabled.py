# alone
# pcache off while a JAX module (pallas) is imported and the program sets a rule for
# a primitive it made; pcache on again; a clean JAX import after would prove the rule
# JAX's own (review 163).
import os
from functools import partial
import pcache

jax.jit(lambda v: v + 1)(x)  # (pcache has read JAX's tables)
pcache.disable()
from jax._src.interpreters import ad
from jax._src.pallas import primitives as PP

if os.environ["PHASE"] == "A":
    ad.defjvp_zero(PP.multiple_of_p)
else:
    ad.primitive_jvps[PP.multiple_of_p] = partial(ad.linear_jvp, PP.multiple_of_p)
pcache.enable()
import jax.experimental.ode  # (a JAX module imported with no program code run)


def f(v):
    return (PP.multiple_of_p.bind(v * v, values=(1,))).sum()


show("jvp", lambda: jax.jit(lambda v: jax.jvp(f, (v,), (jnp.ones_like(v),))[1])(x))
