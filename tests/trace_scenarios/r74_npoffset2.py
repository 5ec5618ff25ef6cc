# Review 74 (npoffset2): numpy views of one bytes buffer (np.frombuffer) keyed without their offset into it: the offset into any buffer base is keyed since.
# two numpy views of one bytes buffer: whether they overlap depends on offsets the key omits
B = np.ones(4, np.float32).tobytes()
A = np.frombuffer(B, np.float32, count=2, offset=0)
mk = lambda C: jax.jit(lambda a: a * (2.0 if np.shares_memory(A, C) else 3.0))
C8 = np.frombuffer(B, np.float32, count=2, offset=8)  # disjoint from A
C4 = np.frombuffer(B, np.float32, count=2, offset=4)  # overlaps A
show("s1", lambda: mk(C8)(x))
show("s2", lambda: mk(C8)(x))
show("s3", lambda: mk(C4)(x))
