# Review 35 (c2_printopt_str): a numpy print option held as a str subclass equal to any str: print options by exact type (else no reuse) since.
class S(str):
    def __eq__(self, o):
        return isinstance(o, str)

    def __hash__(self):
        return 0


def f(a):
    return a * len(np.array2string(np.array([np.nan, 1.0])))


mk = lambda: jax.jit(lambda a: f(a))
np.set_printoptions(nanstr=S("nan"))
show("a", lambda: mk()(x))
show("a2", lambda: mk()(x))
np.set_printoptions(nanstr=S("NotANumberAtAll"))
show("b", lambda: mk()(x))
np.set_printoptions(nanstr="nan")
