# Review 69 (hashlib_obj): a captured hashlib object (heap C type, "stateless sentinel") updated between steps: never reused since.
import hashlib

H = hashlib.sha256()
mk = lambda: jax.jit(lambda a: a * float(H.digest()[0]))
show("s1", lambda: mk()(x))
H.update(b"more")
show("s2", lambda: mk()(x))
