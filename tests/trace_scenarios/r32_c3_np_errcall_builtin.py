# Review 32 (c3_np_errcall_builtin): numpy state tracing reads through user code (an error-log writer, a callback bound to a list, print-option hooks): refused since.
_saved_err, _saved_call = np.geterr(), np.geterrcall()
L = [0, 0, 0, 0, "divide by zero"]
np.seterrcall(L.index)
np.seterr(divide="call")
Z = np.array([0.0])
for i in range(2):
    show(f"i{i}", lambda: jax.jit(lambda x: x * float(np.isinf(1.0 / Z)[0]))(x))
    L.clear()

np.seterr(**_saved_err)
np.seterrcall(_saved_call)
np.set_printoptions(formatter=None, override_repr=None)  # (the next scenarios run in this process)
