# Review 69 (array_array): a captured array.array (a heap C type: taken as a "stateless library sentinel") changed in place: never reused since.
import array

A = array.array("f", [2.0])


def make(buf):
    return jax.jit(lambda a: a * buf[0])


show("s1", lambda: make(A)(x))
A[0] = 3.0
show("s2", lambda: make(A)(x))
