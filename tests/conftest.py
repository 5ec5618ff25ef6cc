"""Shared test setup.

8 host CPU devices so sharding tests can run in-process; this must happen before
jax is imported anywhere. The remote tier's fixtures: a redis-server per module,
a fleet key, a fresh namespace, stock JAX's results of tests/fleet_prog.py.
"""

import os
import uuid

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["JAX_PCACHE_RAISE_ERRORS"] = "1"
# A trace is recorded the first time its key is traced (the default waits for the
# second): the tests' re-created callables are served from their second call on.
# (Subprocess tests that leave out JAX_PCACHE_* run the default:
# tests/test_trace_reuse.py's test_zero_code_process.)
os.environ.setdefault("JAX_PCACHE_TRACE_RECORD_AFTER", "1")

# Persisted traces name a library's objects only while each name holds what its
# module's import put there (`pcache._snapshots`, started by ``enable`` with them on):
# started here too, for the tests that encode and decode in process.
from pcache import _snapshots  # noqa: E402

_snapshots.start()


@pytest.fixture(autouse=True)
def _snapshots_started():
    """Started again before each test (``disable()`` or enabling without persisted
    traces takes the finder out)."""
    _snapshots.start()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from redis_helpers import RedisServer

    srv = RedisServer(tmp_path_factory.mktemp("redis"))
    yield srv
    srv.stop()


@pytest.fixture
def key(tmp_path):
    from redis_helpers import fleet_key

    return fleet_key(tmp_path / "fleet.key")


@pytest.fixture
def ns():
    return "t" + uuid.uuid4().hex[:10]


@pytest.fixture(scope="module")
def stock():
    from redis_helpers import run_host

    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
    return run_host(env, "--stock")["digests"]
