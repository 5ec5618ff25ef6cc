# Review 69 (qualname_held): user "<string>" code over a library's globals, a method of a user class the library holds (registered through its API) whose __qualname__ names a library class: user code since.
import dataclasses, os, sys, tempfile

site = os.path.join(tempfile.mkdtemp(), "site-packages")
os.makedirs(os.path.join(site, "fakereg_r69"))
os.makedirs(os.path.join(site, "fakereg_r69-1.0.dist-info"))
with open(os.path.join(site, "fakereg_r69", "__init__.py"), "w") as fh:
    fh.write(
        "class Holder:\n    impl = None\n\n\ndef register(c):\n    Holder.impl = c\n    return c\n"
    )
with open(os.path.join(site, "fakereg_r69-1.0.dist-info", "RECORD"), "w") as fh:
    fh.write("fakereg_r69/__init__.py,,\nfakereg_r69-1.0.dist-info/RECORD,,\n")
sys.path.insert(0, site)
import fakereg_r69

FLAG = 2.0
loc = {}
exec(
    compile("def scale(self):\n    return __import__('__main__').FLAG\n", "<string>", "exec"),
    fakereg_r69.__dict__,
    loc,
)


@dataclasses.dataclass(frozen=True)
class U:
    scale = loc["scale"]


U.__qualname__ = "Holder"
fakereg_r69.register(U)
M = U()
mk = lambda: jax.jit(lambda a: a * M.scale())
show("s1", lambda: mk()(x))
FLAG = 3.0
show("s2", lambda: mk()(x))
