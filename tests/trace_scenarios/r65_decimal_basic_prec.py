# Review 65 (decimal_basic_prec): a trace computes under decimal.BasicContext, whose precision the program sets between steps: never reused since.
import decimal


def body(a):
    with decimal.localcontext(decimal.BasicContext):
        r = decimal.Decimal(2).sqrt()
    return a * float(r)


mk = lambda: jax.jit(lambda a: body(a))
for p in (3, 9):
    decimal.BasicContext.prec = p
    show(f"p{p}", lambda: mk()(x))
