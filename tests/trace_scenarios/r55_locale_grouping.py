# Review 55 (locale_n): format(v, "n") reads the C library's LC_NUMERIC locale, changed between steps: the locale is in the host state since.
# (The locale is built with localedef into a temporary LOCPATH; where the machine has no locale sources, both steps print "no-locale".)
import locale
import os
import subprocess
import tempfile

where = tempfile.mkdtemp()
try:
    subprocess.run(["localedef", "-i", "de_DE", "-f", "UTF-8", os.path.join(where, "de_DE.UTF-8")],
                   check=True, capture_output=True)  # fmt: skip
    os.environ["LOCPATH"] = where
    built = True
except (OSError, subprocess.CalledProcessError):
    built = False

mk = lambda: jax.jit(lambda a: a * len(format(1234567, "n")))
show("s1", lambda: mk()(x))
try:
    locale.setlocale(locale.LC_NUMERIC, "de_DE.UTF-8" if built else "")
    show("s2", lambda: mk()(x))
except locale.Error:
    show("s2", lambda: "no-locale")
locale.setlocale(locale.LC_NUMERIC, "C")
