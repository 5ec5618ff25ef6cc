# Review 65 (decimal_ctx_flags): trace-time Decimal arithmetic with decimal.ExtendedContext sets that library context's flags: never reused since.
import decimal


def body(a):
    r = decimal.Decimal(2).sqrt(context=decimal.ExtendedContext)
    return a * float(r)


mk = lambda: jax.jit(lambda a: body(a))
for i in range(2):
    decimal.ExtendedContext.clear_flags()
    show(f"s{i}", lambda: mk()(x))
    show(f"f{i}", lambda: np.array(decimal.ExtendedContext.flags[decimal.Inexact]))
