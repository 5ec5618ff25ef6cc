# Review 137: two of a library's property objects over one getter (numpy's
# MaskedArray.data and ._data; JAX's Traced.args_info and LoJax.args_info) are told
# apart by identity (``==``, a dict, ``in``): each is keyed as the object the library
# class holds, never by its content.
import functools

import numpy.ma as ma
from jax._src import stages

MA = ma.MaskedArray


def f(v, d):
    return v * (2.0 if d == MA._data else 3.0)


def g(v, d):
    return v * {stages.Traced.args_info: 2.0, stages.LoJax.args_info: 5.0}[d]


for i, d in enumerate([MA.__dict__["_data"], MA.__dict__["data"]] * 2):
    show(f"partial{i}", lambda d=d: jax.jit(functools.partial(f, d=d))(x))
    show(f"lambda{i}", lambda d=d: jax.jit(lambda v, d=d: f(v, d))(x))
for i, d in enumerate(
    [stages.Traced.__dict__["args_info"], stages.LoJax.__dict__["args_info"]] * 2
):
    show(f"table{i}", lambda d=d: jax.jit(functools.partial(g, d=d))(x))
