# Review 59 (a tracked alias forgotten by a rebinding in another branch (the scan is flow-insensitive)): a local bound to a module in one branch and None in the other, then hasattr on it: the loaded modules are in the in-process key since.
import xml

FLAG = True


def mk():
    def f(a):
        if FLAG:
            m = xml
        else:
            m = None
        return a * (2.0 if hasattr(m, "dom") else 3.0)

    return jax.jit(f)


show("r0", lambda: mk()(x))
import xml.dom

show("r1", lambda: mk()(x))
