# Review 44 (g3): user code given a library module's globals and a "<string>" or a
# library file's name is not library code (its reads are walked and guarded).
import collections
import types

K = 2.0
_code = compile("def g(a):\n    return a * __import__('__main__').K\n", "<string>", "exec")
_code2 = compile("def g(a):\n    return a * K2\n", collections.__file__, "exec")
mk = lambda: types.FunctionType(_code.co_consts[0], vars(collections), "g")
mk2 = lambda: types.FunctionType(_code2.co_consts[0], vars(collections), "g")
collections.K2 = 2.0
show("g1", lambda: jax.jit(mk())(x))
show("h1", lambda: jax.jit(mk2())(x))
K = 3.0
collections.K2 = 3.0
show("g2", lambda: jax.jit(mk())(x))
show("h2", lambda: jax.jit(mk2())(x))
del collections.K2
