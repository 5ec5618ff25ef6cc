"""A real redis-server for the remote tier's tests: started, killed, paused; and
the hosts of a fleet (tests/fleet_prog.py) run against it.

The fixtures (``server``, ``key``, ``ns``, ``stock``) are in tests/conftest.py.

`scripts/dev.py test` (what CI runs) installs Debian's redis-server when it is
missing; a test that needs one fails (never skips) when there is none.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROG = HERE / "fleet_prog.py"
ROOT = HERE.parent
INSTALL_HINT = (
    "redis-server not found: run the tests with `python3 scripts/dev.py test` (it installs "
    "Debian's redis-server), or install it (apt-get install redis-server) or point "
    "PCACHE_REDIS_SERVER at the binary"
)


def server_binary() -> str:
    path = os.environ.get("PCACHE_REDIS_SERVER") or shutil.which("redis-server")
    if not path:
        raise RuntimeError(INSTALL_HINT)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server on a loopback port, no persistence, in ``workdir``."""

    def __init__(
        self,
        workdir: Path,
        *,
        unix_socket: Path | None = None,
        port: int | None = None,
        **config: str,
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = 0 if unix_socket else (port or free_port())
        self.unix_socket = unix_socket
        args = [server_binary(), "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--save", "", "--appendonly", "no", "--dir", str(self.workdir)]
        if unix_socket:
            args += ["--unixsocket", str(unix_socket), "--unixsocketperm", "700"]
        for k, v in config.items():
            args += [f"--{k.replace('_', '-')}", v]
        self.log = open(self.workdir / "redis.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_ready()

    @property
    def url(self) -> str:
        if self.unix_socket:
            return f"unix://{self.unix_socket}?db=0"
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self):
        import redis

        return redis.Redis.from_url(self.url)

    def _wait_ready(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self.read_log()}")
            with contextlib.suppress(Exception):
                if self.client().ping():
                    return
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start: {self.read_log()}")

    def read_log(self) -> str:
        return (self.workdir / "redis.log").read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


class LatencyProxy:
    """A TCP proxy on loopback in front of ``upstream`` (host, port) that holds
    every answer for ``delay`` seconds: a slow Redis (a far region, a congested
    link), each round trip ``delay`` longer."""

    def __init__(self, upstream: tuple[str, int], delay: float) -> None:
        self.upstream, self.delay = upstream, delay
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, server, 0.0), daemon=True).start()
            threading.Thread(
                target=self._pump, args=(server, client, self.delay), daemon=True
            ).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, delay: float) -> None:
        try:
            while data := src.recv(1 << 16):
                if delay:
                    time.sleep(delay)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        self.sock.close()


def fleet_key(path: Path) -> Path:
    """A fleet key file (32 random bytes, mode 0600)."""
    path.write_bytes(secrets.token_hex(32).encode())
    path.chmod(0o600)
    return path


# -- hosts of a fleet ------------------------------------------------------------------


def host_env(cache: Path, url: str, key: Path | None, ns: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
    env.update(
        JAX_PCACHE_DIR=str(cache),
        JAX_PCACHE_REMOTE=url,
        JAX_PCACHE_REMOTE_NAMESPACE=ns,
        JAX_PCACHE_PRELOAD="0",
        PYTHONPATH=str(ROOT),
    )
    if "JAX_PCACHE_CHECK" in os.environ:
        env["JAX_PCACHE_CHECK"] = os.environ["JAX_PCACHE_CHECK"]
    if key is not None:
        env["JAX_PCACHE_REMOTE_SECRET_FILE"] = str(key)
    env.update(extra)
    return env


def start_host(env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(PROG), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen, timeout: float = 300) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-4000:]
    return json.loads(out.strip().splitlines()[-1])


def run_host(env: dict[str, str], *args: str) -> dict:
    return finish(start_host(env, *args))


def remote_warnings(res: dict) -> list[str]:
    return [w for w in res["warnings"] if "remote" in w]


def make_remote(server, ns, key=b"k" * 32, **kw):
    """A `pcache._remote.Remote` on ``server``, namespace ``ns``; what it reports
    is kept in its ``errors``."""
    from pcache import _remote

    errors = []
    rem = _remote.Remote(
        _remote.RemoteConfig(server.url, None, namespace=ns, **kw),
        key,
        report=lambda what, cause, exc: errors.append((what, cause, exc)),
    )
    rem.errors = errors
    return rem
