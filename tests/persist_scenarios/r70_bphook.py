# Review 70 (bphook): traced code calls breakpoint(); B sets a user sys.breakpointhook (interpreter state) that raises: refused since.
# alone: it leaves process state (a user module, an import hook, a breakpoint hook) every later key refuses or differs by
import os, sys

os.environ.setdefault("PYTHONBREAKPOINT", "")
if os.environ["PHASE"] == "B":

    def hook(*a, **k):
        raise RuntimeError("user breakpoint hook")

    sys.breakpointhook = hook
else:
    sys.breakpointhook = lambda *a, **k: None


def f(a):
    breakpoint()
    return a * 2.0


show("bp", lambda: jax.jit(f)(x))
if os.environ.get("JAX_PCACHE_DIR"):
    import pcache

    print(
        "#misses",
        pcache.stats().get("trace_persist_misses"),
        pcache.stats().get("trace_miss_reasons"),
        file=sys.stderr,
    )
