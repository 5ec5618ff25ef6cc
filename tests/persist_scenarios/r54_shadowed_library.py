# Review 54 (shadow_dep): a user copy of opt_einsum (JAX imports it) ahead on PYTHONPATH, different in A and B: a loaded module named like a distribution's must be its file since.
# alone: runs again under another environment
# a user directory on PYTHONPATH (at start) holds a copy of opt_einsum (a dependency JAX imports) with another
# contraction order; A and B hold different copies; jnp.einsum's path comes from it while tracing
import os, sys, shutil, tempfile

if "R54_SHADOW" not in os.environ:
    import opt_einsum as real

    d = tempfile.mkdtemp(prefix="r54o")
    shutil.copytree(os.path.dirname(real.__file__), os.path.join(d, "opt_einsum"))
    path = "[(0, 1), (0, 1)]" if os.environ["PHASE"] == "A" else "[(1, 2), (0, 1)]"
    with open(os.path.join(d, "opt_einsum", "__init__.py"), "a") as fh:
        fh.write(
            "\n_orig_cp = contract_path\ndef contract_path(*a, **k):\n    k['optimize'] = %s\n    return _orig_cp(*a, **k)\n"
            % path
        )
    os.environ["R54_SHADOW"] = d
    os.environ["PYTHONPATH"] = d + os.pathsep + os.environ.get("PYTHONPATH", "")
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
r = np.random.default_rng(0)
A = r.standard_normal((2, 3)).astype(np.float32)
B = r.standard_normal((3, 3)).astype(np.float32)
C = r.standard_normal((3, 2)).astype(np.float32)


def f(a):
    return jnp.einsum("ij,jk,kl->il", A * a[0], B, C)


show("o1", lambda: jax.jit(f)(x + 1))
