# identity between a captured string and a string constant in the function's code
# (interned literal vs runtime-built equal string): key encodes str by value only
mk = lambda s: jax.jit(lambda x: x * (2.0 if s is "SAME" else 3.0))  # noqa: F632, E731
show("interned", lambda: mk("SAME")(x))
show("built", lambda: mk("".join(["SA", "ME"]))(x))
