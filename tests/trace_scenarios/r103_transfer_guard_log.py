# Review 103: under jax.transfer_guard("log"), a served call run by JAX's jaxpr-keyed C++
# dispatch logged an implicit transfer without its details (as JAX's C++ fast path
# does), where stock's first call of a new jit object logs them in full: transfer
# guards now keep JAX's slow path.
import os, re, sys, tempfile

# JAX's transfer guard in "log" mode writes (C++ absl log) to fd 2: capture it and print it
mk = lambda: jax.jit(lambda a: a * 2)
n = np.arange(3, dtype=np.float32)
tmp = tempfile.TemporaryFile()
for i in range(5):
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(tmp.fileno(), 2)
    try:
        with jax.transfer_guard("log"):
            o = mk()(n)
            o.block_until_ready()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    tmp.seek(0)
    txt = tmp.read().decode()
    tmp.seek(0)
    tmp.truncate()
    logs = [re.sub(r"^.*guard_lib\.cc:\d+\] ", "", l) for l in txt.splitlines() if "transfer" in l]
    print(i, np.asarray(o).tobytes().hex(), logs)
