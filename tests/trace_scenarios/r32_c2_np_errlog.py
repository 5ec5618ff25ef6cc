# Review 32 (c2_np_errlog): numpy state tracing reads through user code (an error-log writer, a callback bound to a list, print-option hooks): refused since.
_saved_err, _saved_call = np.geterr(), np.geterrcall()
FLAG = [False]


class L:
    def write(self, m):
        if FLAG[0]:
            raise ValueError(m)


np.seterrcall(L())
np.seterr(divide="log")
Z = np.array([0.0])
for f in (False, True):
    FLAG[0] = f
    show(f"f{f}", lambda: jax.jit(lambda x: x * float(np.isinf(1.0 / Z)[0]))(x))

np.seterr(**_saved_err)
np.seterrcall(_saved_call)
np.set_printoptions(formatter=None, override_repr=None)  # (the next scenarios run in this process)
