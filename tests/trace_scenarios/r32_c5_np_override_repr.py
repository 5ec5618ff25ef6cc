# Review 32 (c5_np_override_repr): numpy state tracing reads through user code (an error-log writer, a callback bound to a list, print-option hooks): refused since.
_saved_err, _saved_call = np.geterr(), np.geterrcall()
S = [1.0]
np.set_printoptions(override_repr=lambda a: str(float(a[0]) * S[0]))
A = np.array([1.5])
for s in (1.0, 2.0):
    S[0] = s
    show(f"s{s}", lambda: jax.jit(lambda x: x * float(repr(A)))(x))

np.seterr(**_saved_err)
np.seterrcall(_saved_call)
np.set_printoptions(formatter=None, override_repr=None)  # (the next scenarios run in this process)
