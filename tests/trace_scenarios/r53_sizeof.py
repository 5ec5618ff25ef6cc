# Review 53 (sizeof): a captured list's allocated size (equal contents) read while tracing: __sizeof__/__hash__ are reflective since.
# a captured list's __sizeof__ (its allocated capacity) read at trace time; contents equal
L = [1.0, 2.0, 3.0]
mk = lambda: jax.jit(lambda a: a * (L.__sizeof__() // 8))
show("s1", lambda: mk()(x))
L.extend([0.0] * 20)
del L[3:]  # same contents, larger capacity
show("s2", lambda: mk()(x))
