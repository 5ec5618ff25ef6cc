# Review 79 (sent_cls): a library object() sentinel held as a class attribute, passed through a user global in A, the program's own object() in B: class attributes of a library's classes are indexed since.
# alone: it installs a fake library
# a library's object() sentinel held as a class attribute (not a module attribute); B passes its own object()
import os, sys, textwrap

PH = os.environ["PHASE"]
root = "/tmp/r79fix_fx_sc/site-packages"
os.makedirs(root + "/sclib", exist_ok=True)
os.makedirs(root + "/sclib-1.0.dist-info", exist_ok=True)
src = textwrap.dedent("""
class K:
    MISSING = object()
def pick(a, v):
    return a * 2.0 if v is K.MISSING else a * 3.0
""")
open(root + "/sclib/__init__.py", "w").write(src)
open(root + "/sclib-1.0.dist-info/METADATA", "w").write(
    "Metadata-Version: 2.1\nName: sclib\nVersion: 1.0\n"
)
open(root + "/sclib-1.0.dist-info/RECORD", "w").write(
    "sclib/__init__.py,,\nsclib-1.0.dist-info/METADATA,,\nsclib-1.0.dist-info/RECORD,,\n"
)
sys.path.insert(0, root)
import sclib


def mk(v):
    def f(a):
        return sclib.pick(a, v)

    return f


V = sclib.K.MISSING if PH == "A" else object()
show("s1", lambda: jax.jit(mk(V))(x))
