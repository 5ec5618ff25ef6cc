# Review 57 (build_class_hook): a class statement while tracing runs builtins.__build_class__, replaced by user code reading a global: guarded as a builtin read since.
import builtins


class Two:
    k = 2.0


class Three:
    k = 3.0


_orig = builtins.__build_class__
USE_THREE = False


def hook(func, name, *bases, **kw):
    if name == "K":
        return Three if USE_THREE else Two
    return _orig(func, name, *bases, **kw)


builtins.__build_class__ = hook


def f(a):
    class K:
        pass

    return a * K.k


mk = lambda: jax.jit(lambda a: f(a))
show("s1", lambda: mk()(x))
show("s1b", lambda: mk()(x))
USE_THREE = True
show("s2", lambda: mk()(x))
builtins.__build_class__ = _orig
