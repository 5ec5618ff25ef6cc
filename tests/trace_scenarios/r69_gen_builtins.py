# Review 69 (gen_builtins): an equinox-generated flatten re-made over a namespace whose __builtins__ was another dict: never reused since.
# when the function was created (then reset): proven "library code", but its len is user code
import dataclasses, functools, types, builtins
import equinox  # noqa: F401  (loads equinox._module._flatten)
from equinox._module._flatten import generate_flatten_functions

FLAG = [False]


def evil_len(o):
    return 99 if FLAG[0] else len(o)


@dataclasses.dataclass(frozen=True)
class C:
    a: float


flat0, _, unflat = generate_flatten_functions(C, dataclasses.fields(C))
ns = dict(flat0.__globals__)
real_b = ns["__builtins__"]
ns["__builtins__"] = {"len": evil_len}
flat = types.FunctionType(flat0.__code__, ns, "flatten")
ns["__builtins__"] = real_b
ns["flatten"] = flat
jax.tree_util.register_pytree_node(C, flat, functools.partial(unflat, C))
M = C(1.0)
mk = lambda: jax.jit(
    lambda a: a * (2.0 if "Missing, Missing" in str(jax.tree_util.tree_structure(M)) else 3.0)
)
show("s1", lambda: mk()(x))
FLAG[0] = True
show("s2", lambda: mk()(x))
