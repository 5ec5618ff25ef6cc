# Review 69 (thread_local): a threading.local() (a heap C type: passes as a "stateless library sentinel") whose attribute changes: never reused since.
import threading

L = threading.local()
L.v = 2.0
mk = lambda: jax.jit(lambda a: a * L.v)
show("s1", lambda: mk()(x))
L.v = 3.0
show("s2", lambda: mk()(x))
