# Review 52 (bs1, tz1, cwd1, fe1): process state a trace reads, set differently in B:
# alone: changes what the key holds for every later call (registrations, process state)
# numpy's ufunc buffer size (a casting reduction's rounding), the time zone
# (time.tzset: time and datetime are no longer plain stdlib), the working directory
# (os.path.abspath), the CPU's rounding mode (fesetround; last: it stays set).
import ctypes
import os
import tempfile
import time

B = os.environ.get("PHASE") == "B"
A16 = np.random.default_rng(0).random(60000).astype(np.float16)
if B:
    np.setbufsize(64)
show("bs", lambda: jax.jit(lambda a: a + np.sum(A16, dtype=np.float32))(x))
np.setbufsize(8192)

if B:
    os.environ["TZ"] = "EST+5"
    time.tzset()
show("tz", lambda: jax.jit(lambda a: a + time.timezone)(x))

here = os.getcwd()
if B:
    os.chdir(tempfile.gettempdir() + "/")
show("cwd", lambda: jax.jit(lambda a: a + len(os.path.abspath("q")))(x))
os.chdir(here)

K1, K3 = 1.0, 3.0
if B:
    ctypes.CDLL("libm.so.6").fesetround(0x800)  # FE_UPWARD
show("fe", lambda: jax.jit(lambda a: a * 0.0 + (K1 / K3 - 0.3333333333333333) * 1e17)(x))
