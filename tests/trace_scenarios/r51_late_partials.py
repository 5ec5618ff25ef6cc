# Review 51 (p3, p10): a custom_jvp rule's later Python reaches the program's array
# through a jax.tree_util.Partial (a functools.partial subclass), and a plain
# functools.partial whose fields __setstate__ rebinds in place: both met by the key,
# both now state late Python may read.
import functools

from jax._src.util import safe_map

P = jax.tree_util.Partial
jvp = lambda f: jax.jvp(f, (x,), (x + 1.0,))[1]
d = np.zeros((3,), np.int32)
cf = jax.custom_jvp(jax.lax.add)
cf.defjvp(P(jax.tree_util.tree_map, P(jax.lax.select_n, d)))
mk = lambda: jax.jit(lambda v: cf(v, v * 2.0))
f1 = mk()
show("a-p", lambda: f1(x))
d[:] = 1
show("a-1", lambda: jvp(f1))
d[:] = 0
show("a-2", lambda: jvp(mk()))

p = functools.partial(jax.lax.select_n, np.int32(0))
cg = jax.custom_jvp(jax.lax.add)
cg.defjvp(functools.partial(safe_map, p))
mk = lambda: jax.jit(lambda v: cg(v, v * 2.0))
f1 = mk()
show("b-p", lambda: f1(x))
p.__setstate__((jax.lax.select_n, (np.int32(1),), {}, None))
show("b-1", lambda: jvp(f1))
p.__setstate__((jax.lax.select_n, (np.int32(0),), {}, None))
show("b-2", lambda: jvp(mk()))
