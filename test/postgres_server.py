"""A real PostgreSQL server for the fleet-store tests: initdb into a temporary folder,
started on a free loopback port with its own socket folder, one fresh database per test,
stopped (pg_ctl stop -m fast) at the end of the session. Nothing outside the folder is
touched. As root the server runs as the `postgres` system user (initdb refuses root)."""

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text


def _server_bin_dir() -> Path:
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if candidates:
        return Path(candidates[-1]).parent
    pytest.fail("PostgreSQL server binaries (initdb, pg_ctl) not found: "
                "scripts/ensure_postgres.sh installs Debian's postgresql package")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_server_user(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _run(command: list[str], timeout: float) -> None:
    done = subprocess.run(_as_server_user(command), capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        pytest.fail(f"{Path(command[0]).name} failed ({done.returncode}): "
                    f"{done.stderr.strip() or done.stdout.strip()}")


class PostgresServer:
    """A throwaway server: its own data and socket folders, a free loopback port."""

    def __init__(self):
        self.bin_dir = _server_bin_dir()
        # Not under pytest's tmp folder: the server user must be able to reach it.
        self.root = Path(tempfile.mkdtemp(prefix="robot_memory_pg_"))
        self.data, sockets = self.root / "data", self.root / "sockets"
        sockets.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
            shutil.chown(sockets, "postgres")
        self.port = _free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}"
        self.options = (f"-h 127.0.0.1 -p {self.port} -k {sockets} -c fsync=off "
                        "-c max_connections=60 -c shared_buffers=32MB")
        _run([str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", "postgres",
              "--auth=trust", "-E", "UTF8", "--no-sync"], timeout=120)

    def start(self) -> None:
        _run([str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-o", self.options,
              "-l", str(self.root / "server.log"), "-w", "-t", "60", "start"], timeout=90)

    def stop(self) -> None:
        """Fast shutdown: open sessions are ended, as in a server restart."""
        subprocess.run(_as_server_user([str(self.bin_dir / "pg_ctl"), "-D", str(self.data),
                                        "-m", "fast", "-w", "stop"]),
                       capture_output=True, timeout=60)

    def new_database(self) -> str:
        """The URL of a fresh, empty database."""
        name = f"rm_{uuid.uuid4().hex[:12]}"
        admin = create_engine(f"{self.url}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        return f"{self.url}/{name}"

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _running_server():
    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.remove()


# A running server shared by the session's tests.
pg_server = pytest.fixture(scope="session", name="pg_server")(_running_server)
# A running server of the test's own, which it may stop and start.
own_pg_server = pytest.fixture(name="own_pg_server")(_running_server)


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty database on the session's server."""
    return pg_server.new_database()
