"""A user PRNG implementation, registered (jax._src.random.prng.register_prng), whose
random_bits reads a global: JAX runs it while lowering random_bits."""

import numpy as onp
from jax.extend.random import define_prng_impl

OFFSET = 1


def _seed(seed):
    return jnp.stack([jnp.asarray(seed, jnp.uint32), jnp.uint32(0)])


def _split(key, shape):
    return jnp.broadcast_to(key, (*shape, 2))


def _fold_in(key, data):
    return key + jnp.asarray(data, jnp.uint32)


def _bits(key, bit_width, shape):
    return jnp.full(shape, key[0] + OFFSET, dtype=jnp.uint32)


IMPL = define_prng_impl(
    key_shape=(2,),
    seed=_seed,
    split=_split,
    random_bits=_bits,
    fold_in=_fold_in,
    name="r7_user_impl",
    tag="r7u",
)
from jax._src.random.prng import register_prng

register_prng(IMPL._impl)
K = jax.random.wrap_key_data(jnp.array([5, 0], jnp.uint32), impl=IMPL)

mk = lambda: jax.jit(lambda k: jax.random.bits(k, (3,)))
show("O=1", lambda: mk()(K))
OFFSET = 7
show("O=7", lambda: mk()(K))
