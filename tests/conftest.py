"""Shared test setup.

8 host CPU devices so sharding tests can run in-process; this must happen before
jax is imported anywhere.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["JAX_PCACHE_RAISE_ERRORS"] = "1"
