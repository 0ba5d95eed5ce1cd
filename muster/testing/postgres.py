"""A throwaway PostgreSQL server for tests and benchmarks: a temp dir, loopback, trust auth.

It uses the Debian server binaries (``/usr/lib/postgresql/*/bin``). Root may not run
``initdb``, so under root the server runs as the ``postgres`` account via ``runuser``; the
data directory is chowned to it. ``fsync=off``: the data is thrown away anyway.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from muster.testing import free_port, wait_for

__all__ = ["PostgresServer", "PostgresUnavailable", "find_bindir", "start_postgres"]


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL server programs are not installed (or cannot run here)."""


@dataclass
class PostgresServer:
    """A running server; stop it with :meth:`stop` (it also removes the temp dir)."""

    bindir: Path
    root: Path
    port: int
    pid: int

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of ``database`` on this server."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database (a fresh random name by default) and return its URL."""
        import psycopg

        name = name or f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Fast shutdown (SIGINT to the postmaster), wait for it to exit, remove the files."""
        try:
            os.kill(self.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        else:
            wait_for(lambda: not _alive(self.pid), timeout=30, what=f"PostgreSQL (pid {self.pid}) to stop")
        shutil.rmtree(self.root, ignore_errors=True)


def find_bindir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` that has initdb, or one on PATH."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3].split(".")[0])
    )
    if candidates:
        return Path(candidates[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def start_postgres(base_dir: str | Path | None = None) -> PostgresServer:
    """Initialise and start a server on a free loopback port; raises PostgresUnavailable."""
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailable(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb); "
            "install it with `apt-get install postgresql`"
        )
    root = Path(tempfile.mkdtemp(prefix="muster-pg-", dir=base_dir))
    as_user = _run_as()
    if as_user:
        shutil.chown(root, as_user, as_user)
    data, port = root / "data", free_port()
    try:
        _run(
            as_user,
            [
                bindir / "initdb",
                "-D",
                data,
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ],
        )
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off -c max_connections=200"
        _run(
            as_user,
            [
                bindir / "pg_ctl",
                "-D",
                data,
                "-l",
                root / "server.log",
                "-w",
                "-t",
                "30",
                "-o",
                options,
                "start",
            ],
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        log = (root / "server.log").read_text(errors="replace") if (root / "server.log").exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        detail = getattr(exc, "stderr", "") or ""
        raise PostgresUnavailable(f"could not start PostgreSQL: {exc} {detail} {log[-2000:]}") from exc
    pid = int((data / "postmaster.pid").read_text().splitlines()[0])
    return PostgresServer(bindir=bindir, root=root, port=port, pid=pid)


def _run_as() -> str | None:
    """The account to run the server as: ``postgres`` under root (initdb refuses root)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresUnavailable(
            "running as root but there is no `postgres` account to run the server"
        ) from None
    if shutil.which("runuser") is None:
        raise PostgresUnavailable("running as root but `runuser` is missing")
    return "postgres"


def _run(as_user: str | None, argv: list[str | Path]) -> None:
    cmd = [str(a) for a in argv]
    if as_user:
        cmd = ["runuser", "-u", as_user, "--", *cmd]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # An exited daemon may linger as a zombie where PID 1 does not reap orphans.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
