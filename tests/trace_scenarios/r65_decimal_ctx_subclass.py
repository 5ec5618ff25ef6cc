# Review 65 (decimal_ctx_subclass): the current decimal context is a user Context subclass whose method reads a global, called while traced: never reused since.
import decimal

SCALE = "2"


class Ctx(decimal.Context):
    def create_decimal(self, num="0"):
        return decimal.Context.create_decimal(self, SCALE)


decimal.setcontext(Ctx())
mk = lambda: jax.jit(lambda a: a * float(decimal.getcontext().create_decimal()))
for s in ("2", "3"):
    SCALE = s
    show(f"s{s}", lambda: mk()(x))
