# Review 44 (d1): two distributions install a module of one name; sys.path order picks one: the providing distribution is in the key.
# alone: the distributions' order on sys.path (in the key since review 62) differs for every later call
import os, sys, tempfile

root = tempfile.mkdtemp()
for tag, k in (("a", "2.0"), ("b", "3.0")):
    sp = os.path.join(root, tag, "site-packages")
    os.makedirs(os.path.join(sp, f"dist{tag}-1.0.dist-info"))
    with open(os.path.join(sp, "helpers_r44.py"), "w") as fh:
        fh.write(f"K = {k}\ndef g(a):\n    return a * K\n")
    with open(os.path.join(sp, f"dist{tag}-1.0.dist-info", "RECORD"), "w") as fh:
        fh.write("helpers_r44.py,,\n")
order = ["a", "b"] if os.environ.get("PHASE") == "A" else ["b", "a"]
sys.path[:0] = [os.path.join(root, t, "site-packages") for t in order]
import helpers_r44


def f(a):
    return helpers_r44.g(a)


show("d", lambda: jax.jit(f)(x))
