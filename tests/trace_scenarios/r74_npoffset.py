# Review 74 (npoffset): numpy views of one bytes buffer (np.frombuffer) keyed without their offset into it: the offset into any buffer base is keyed since.
# a numpy view of a bytes buffer: the offset into the buffer is not keyed
from numpy.lib.stride_tricks import as_strided

B = np.array([1, 1, 1, 0], np.float32).tobytes()
mk = lambda A: jax.jit(lambda a: a * as_strided(A, shape=(3,)).sum())
A0 = np.frombuffer(B, np.float32, count=2, offset=0)  # [1, 1], followed by 1
A4 = np.frombuffer(B, np.float32, count=2, offset=4)  # [1, 1], followed by 0
show("s1", lambda: mk(A0)(x))
show("s2", lambda: mk(A0)(x))
show("s3", lambda: mk(A4)(x))
