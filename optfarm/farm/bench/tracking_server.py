"""An MLflow tracking server for a team, on this machine: ``mlflow server`` backed by its own
PostgreSQL cluster (the distribution's PostgreSQL: ``initdb``, ``postgres``), with a folder as
its artifact store, both on 127.0.0.1 under one temporary folder; for ``farm bench-farm
--tracking-server postgresql`` and the tests. Every process it starts is stopped by its own id.

The server runs as MLflow's documented ``--gunicorn-opts`` deployment: its Flask app in gunicorn
``gthread`` workers (``workers`` processes of ``threads`` threads each), and without MLflow's job
runner (``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false``: its queue consumers are for GenAI jobs and
took ~0.2 CPU of this 2-core machine while idle). Measured here (300 runs of a sweep's size, 3
REST calls each, 8 client threads, load 14-18): gunicorn 2 x 4 threads 27-29 ms of server CPU
a run, 21-25 runs/s; MLflow's default (uvicorn with its FastAPI middleware in front of the same
Flask app, 2 workers) 39-47 ms, 12-14 runs/s -- most of the difference is the ASGI layer.

PostgreSQL refuses to run as root: as root the cluster runs as the ``postgres`` user that the
distribution's package creates. ``available()`` says why it cannot start, or None.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Self

from optfarm.farm.runtime.ports import free_ports

__all__ = ["PostgresMlflowServer", "available"]


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(versions[-1]) if versions else None


def _runuser() -> str | None:
    """util-linux's ``runuser``: on PATH, or in the sbin folders a non-login PATH leaves out."""
    return shutil.which("runuser") or next(
        (str(p) for p in (Path("/usr/sbin/runuser"), Path("/sbin/runuser")) if p.exists()), None
    )


def _user() -> str | None:
    """The user the cluster runs as: ours, or ``postgres`` when we are root."""
    if os.geteuid() != 0:
        return None
    return "postgres"


def available() -> str | None:
    """Why a PostgreSQL-backed server cannot start here (one line), or None."""
    for name in ("initdb", "postgres"):
        if _pg_bin(name) is None:
            return f"PostgreSQL's {name} is not installed (e.g. apt-get install -y postgresql)"
    if os.geteuid() == 0:
        import pwd

        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a postgres user to run PostgreSQL as"
        if _runuser() is None:
            return "running as root without runuser (util-linux) to run PostgreSQL as postgres"
    try:
        import psycopg  # noqa: F401  (MLflow's server talks to PostgreSQL through it)
    except ImportError:
        return "psycopg is not installed (pip install 'psycopg[binary]')"
    return None


def _wait(url_or_port, proc: subprocess.Popen, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if isinstance(url_or_port, int):
                socket.create_connection(("127.0.0.1", url_or_port), timeout=1).close()
            else:
                urllib.request.urlopen(url_or_port, timeout=5).read()
            return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"did not answer within {timeout:.0f} s: {log.read_text()[-2000:]}")


class PostgresMlflowServer:
    """``start()``: a PostgreSQL cluster (database ``mlflow``) and an ``mlflow server`` with
    ``workers`` gunicorn processes of ``threads`` threads in front of it (``threads=0``: MLflow's
    default, uvicorn) running MLflow's app, or the ``mlflow.app`` entry point ``app`` (e.g.
    ``optfarm``); ``url`` is the tracking URI, ``database_uri`` the database's; ``stop()``
    ends both."""

    def __init__(
        self,
        root: str | Path | None = None,
        workers: int = 2,
        threads: int = 4,
        app: str | None = None,
    ):
        self.root = Path(root or tempfile.mkdtemp(prefix="mlflow-pg-", dir="/tmp"))
        self.workers, self.threads, self.app = workers, threads, app
        self.pg_port, self.port = free_ports(2)
        self.url = f"http://127.0.0.1:{self.port}"
        self.database_uri = f"postgresql+psycopg://postgres@127.0.0.1:{self.pg_port}/mlflow"
        self._postgres: subprocess.Popen | None = None
        self._server: subprocess.Popen | None = None

    def _as_user(self, args: list[str]) -> list[str]:
        user = _user()
        return [_runuser(), "-u", user, "--", *args] if user else args

    def start(self) -> PostgresMlflowServer:
        why = available()
        if why:
            raise RuntimeError(why)
        data = self.root / "pg"
        self.root.mkdir(parents=True, exist_ok=True)
        if _user():
            shutil.chown(self.root, _user())
        log = self.root / "postgres.log"
        subprocess.run(
            self._as_user(
                [
                    _pg_bin("initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "--no-sync",
                    "-E",
                    "UTF8",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=300,
        )
        with open(log, "w") as f:
            self._postgres = subprocess.Popen(
                self._as_user(
                    [
                        _pg_bin("postgres"),
                        "-D",
                        str(data),
                        "-h",
                        "127.0.0.1",
                        "-p",
                        str(self.pg_port),
                        "-k",
                        str(self.root),
                    ]
                ),
                stdout=f,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            _wait(self.pg_port, self._postgres, 120, log)
            self._create_database()
            self._start_mlflow()
        except BaseException:
            self.stop()
            raise
        return self

    def _create_database(self) -> None:
        import psycopg

        deadline = time.monotonic() + 60
        while True:  # the port opens before the cluster accepts connections
            try:
                with psycopg.connect(
                    host="127.0.0.1",
                    port=self.pg_port,
                    user="postgres",
                    dbname="postgres",
                    autocommit=True,
                ) as conn:
                    conn.execute("CREATE DATABASE mlflow")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _start_mlflow(self) -> None:
        mlflow = shutil.which("mlflow", path=str(Path(sys.executable).parent)) or "mlflow"
        log = self.root / "server.log"
        with open(log, "w") as f:
            self._server = subprocess.Popen(
                [
                    mlflow,
                    "server",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--backend-store-uri",
                    self.database_uri,
                    "--artifacts-destination",
                    (self.root / "artifacts").as_uri(),
                    "--workers",
                    str(self.workers),
                    *(
                        ["--gunicorn-opts", f"--threads {self.threads} --timeout 120"]
                        if self.threads
                        else []
                    ),  # else MLflow's default front, uvicorn
                    *(["--app-name", self.app] if self.app else []),
                ],
                env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
                stdout=f,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _wait(self.url + "/health", self._server, 300, log)

    def stop(self) -> None:
        """Stop the server and the cluster (SIGTERM to each one's process group, then
        SIGKILL after 20 s), and remove the folder."""
        for proc in (self._server, self._postgres):
            if proc is None or proc.poll() is not None:
                continue
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._server = self._postgres = None
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
