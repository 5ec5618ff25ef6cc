# A user class made by type() with __slots__=() then `del K.__slots__`, its __module__
# naming no imported module: it passes _usercode._compiled (taken for an extension
# class, i.e. library), so it is keyed by identity only; its class attributes (builtin
# functions) are not compared. Changing K.op after a trace -> stale trace reused.
import operator

K = type("K", (), {"__slots__": (), "op": operator.add, "__module__": "cfgmod"})
del K.__slots__
mk = lambda: jax.jit(lambda x: K.op(x, x))
show("add", lambda: mk()(x))
K.op = operator.mul
show("mul", lambda: mk()(x))
