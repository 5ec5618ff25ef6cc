#!/usr/bin/env bash
# Run pcache's JAX-facing tests against another JAX line in its own venv.
#
#   bash scripts/compat.sh            # jax/jaxlib 0.9.2 (the oldest line with the jit seam)
#   bash scripts/compat.sh 0.10.0     # any version; outside pcache._compat.SUPPORTED only
#                                     # the HLO-level seam runs and jit tests fail
#   bash scripts/compat.sh 0.9.2 -k pmap   # extra arguments go to pytest
#
# The venv (.venv-jax-VER) is created and filled on first use; later runs reuse it
# without touching the network when jax/jaxlib VER and this pcache tree are installed.
# CI tests the newest served line (0.10.x) through `python3 scripts/dev.py test`.
set -euo pipefail
cd "$(dirname "$0")/.."
ver="${1:-0.9.2}"
env_dir=".venv-jax-$ver"
py="$env_dir/bin/python"
ready() {
  [ -x "$py" ] && "$py" - "$ver" "$PWD" <<'PY' 2>/dev/null
import os, sys
import equinox, jax, jaxlib, pcache, pcache.store, pytest, redis  # noqa: F401
ok = jax.__version__ == jaxlib.__version__ == sys.argv[1]
ok = ok and os.path.dirname(os.path.dirname(os.path.abspath(pcache.__file__))) == sys.argv[2]
sys.exit(0 if ok else 1)
PY
}
if ! ready; then
  [ -x "$py" ] || python3 -m venv "$env_dir"
  "$env_dir/bin/pip" install --quiet --upgrade pip
  "$env_dir/bin/pip" install --quiet "jax==$ver" "jaxlib==$ver" -e '.[test]'
fi
"$py" -c 'import jax, pcache._compat as c; print("jax", jax.__version__, "jit seam:", c.JIT_SEAM)'
exec "$py" -m pytest -q -p no:cacheprovider \
  tests/test_jit_cache.py tests/test_runtime.py tests/test_preload.py tests/test_fingerprint_api.py \
  tests/test_canon.py tests/test_soundness.py tests/test_lowering_effects.py \
  tests/test_callbacks.py tests/test_bundles.py tests/test_trace_reuse.py tests/test_remote.py \
  "${@:2}"
