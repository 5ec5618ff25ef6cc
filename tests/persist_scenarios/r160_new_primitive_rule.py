# alone
# served (its first call, made before the registration)
# A JVP rule the program sets for a JAX primitive made after pcache read JAX's tables
# (pallas imported after the first call): JAX's zero JVP in A, copy_p's in B. The
# rules the import registered are its own; one set after is the program's, in the key
# (review 160).
import os

jax.jit(lambda v: v + 1)(x)  # (pcache has read JAX's tables)
from jax import lax
from jax._src.interpreters import ad
from jax._src.pallas import primitives as PP

if os.environ["PHASE"] == "A":
    ad.defjvp_zero(PP.multiple_of_p)
else:
    ad.primitive_jvps[PP.multiple_of_p] = ad.primitive_jvps[lax.copy_p]


def f(v):
    return (PP.multiple_of_p.bind(v * v, values=(1,))).sum()


show("g", lambda: jax.jit(jax.grad(f))(x))
