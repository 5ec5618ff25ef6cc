#!/usr/bin/env bash
# Run pcache's JAX-facing tests against another JAX line in a throwaway venv.
#
#   bash scripts/compat.sh            # jax/jaxlib 0.10.0 (jit seam: 0.10.x; on 0.9.x only the HLO-level seam runs)
#   bash scripts/compat.sh 0.10.0     # any version
#
# CI tests the newest served line (0.10.x) through `python3 scripts/dev.py test`.
set -euo pipefail
cd "$(dirname "$0")/.."
ver="${1:-0.10.0}"
env_dir=".venv-jax-$ver"
[ -x "$env_dir/bin/python" ] || python3 -m venv "$env_dir"
"$env_dir/bin/pip" install --quiet --upgrade pip
"$env_dir/bin/pip" install --quiet "jax==$ver" "jaxlib==$ver" -e '.[test]'
"$env_dir/bin/python" -c 'import jax; print("jax", jax.__version__)'
exec "$env_dir/bin/python" -m pytest -q -p no:cacheprovider \
  tests/test_jit_cache.py tests/test_runtime.py tests/test_fingerprint_api.py tests/test_canon.py "${@:2}"
