# Review 61 (m3): a user module on sys.path in a directory that is merely named site-packages (no distribution's RECORD lists it) is user code: its state is keyed.
import os, sys, tempfile

site = os.path.join(tempfile.mkdtemp(), "site-packages")
os.makedirs(site)
with open(os.path.join(site, "umod_r61.py"), "w") as fh:
    fh.write(
        "SCALE = 2.0\ndef scaled(a):\n    return a * SCALE\ndef set_scale(v):\n    global SCALE\n    SCALE = v\n"
    )
sys.path.insert(0, site)
import umod_r61

mk = lambda: jax.jit(lambda a: umod_r61.scaled(a))
show("s1", lambda: mk()(x))
umod_r61.set_scale(3.0)
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
