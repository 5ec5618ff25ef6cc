# Review 34 (a1_libnode_dictget): a library type registered as a pytree node with a builtin method bound to a user dict (FLAT.get): its state is keyed since.
import jax

FLAT = {range(1): ((1.0,), None)}
jax.tree_util.register_pytree_node(range, FLAT.get, FLAT.get)
mk = lambda: jax.jit(lambda x: x * jax.tree_util.tree_leaves(range(1))[0])
for k in (1.0, 2.0):
    FLAT[range(1)] = ((k,), None)
    show(f"k{k}", lambda: mk()(x))
