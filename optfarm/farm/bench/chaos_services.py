"""The servers a chaos soak (``optfarm.farm.bench.chaos``) runs a sweep against and then
disturbs, all on 127.0.0.1 under one folder: a real ``mlflow server`` (sqlite backend, its job
runner off), a real S3 server (moto's standalone ``moto_server``, from the ``test`` extra), and
the proxy that makes MLflow's answers late (``optfarm.farm.bench.late_answers``). Each server
runs in a process group of its own, paused (SIGSTOP / SIGCONT), killed and restarted by that
group's id; nothing else is signalled.

``processes`` reads the process tree below a pid from ``/proc`` (a sweep's driver, its Ray
workers), and ``CpuMeter`` sums the CPU time of every process below the soak's own, each
counted at its last reading (sampled every second).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Self

from optfarm.farm.bench.late_answers import LateAnswers
from optfarm.farm.runtime.ports import free_ports

__all__ = [
    "CpuMeter",
    "MlflowServer",
    "S3Server",
    "Services",
    "in_session",
    "processes",
    "unavailable",
]

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "optfarm-chaos",
    "AWS_SECRET_ACCESS_KEY": "optfarm-chaos",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def _binary(name: str) -> str | None:
    return shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)


def unavailable() -> str | None:
    """Why the soak's servers cannot start here (one line), or None."""
    if _binary("moto_server") is None:
        return "moto's S3 server is not installed (pip install 'optfarm[test]')"
    if _binary("mlflow") is None:
        return "MLflow's command line is not installed"
    return None


class _Server:
    """A server process (``command``, with ``env`` added to this one's) in its own process
    group, listening on ``port`` of 127.0.0.1; its output appended to ``root/NAME.log``."""

    def __init__(self, root: Path, name: str, port: int, command: list[str], env: dict[str, str]):
        self.root, self.name, self.port = root, name, port
        self.command, self.env = command, env
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 600) -> None:
        with (self.root / f"{self.name}.log").open("a") as log:  # the child keeps its own
            self.proc = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, **self.env}, start_new_session=True,
            )  # fmt: skip
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"{self.name} does not listen on 127.0.0.1:{self.port}")

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL the whole group (SIGCONT first: a stopped group is killed all the same)."""
        self.signal(signal.SIGKILL)
        self.signal(signal.SIGCONT)
        self.proc.wait()
        _wait_group_gone(self.proc.pid)

    def stop(self) -> None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


def _wait_group_gone(pgid: int, timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)


class MlflowServer(_Server):
    """``mlflow server`` with its sqlite store and artifacts under ``root``, one worker, its
    job runner off (its queue consumers are for GenAI jobs)."""

    def __init__(self, root: Path, port: int):
        command = [
            _binary("mlflow"), "server", "--host", "127.0.0.1", "--port", str(port),
            "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
            "--artifacts-destination", (root / "mlartifacts").as_uri(), "--workers", "1",
        ]  # fmt: skip
        super().__init__(
            root, "mlflow-server", port, command, {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        )
        self.url = f"http://127.0.0.1:{port}"

    def start(self, timeout: float = 600) -> None:
        super().start(timeout)
        end = time.monotonic() + timeout
        while True:  # the port opens before the app answers
            try:
                urllib.request.urlopen(self.url + "/health", timeout=30).read()
                return
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(1)


class S3Server(_Server):
    """moto's S3 server (in memory: a restart would lose the store, so it is only paused)."""

    def __init__(self, root: Path, port: int):
        command = [_binary("moto_server"), "-H", "127.0.0.1", "-p", str(port)]
        super().__init__(root, "s3-server", port, command, {})
        self.url = f"http://127.0.0.1:{port}"

    def bucket(self, name: str) -> str:
        """A new bucket ``name``; its ``s3://`` URI."""
        import boto3

        boto3.client("s3", endpoint_url=self.url, region_name="us-east-1").create_bucket(
            Bucket=name
        )
        return f"s3://{name}"


class Services:
    """The soak's servers under ``root``: ``mlflow`` (its URL for checks), ``s3``, ``proxy``
    (in front of ``mlflow``; ``tracking_uri`` is its address); a context manager that stops
    every one of them."""

    def __init__(self, root: Path):
        mlflow_port, s3_port = free_ports(2)
        self.root = root
        self.mlflow = MlflowServer(root, mlflow_port)
        self.s3 = S3Server(root, s3_port)
        self.proxy = LateAnswers(mlflow_port)
        self.tracking_uri = ""

    def __enter__(self) -> Self:
        self._saved = {k: os.environ.get(k) for k in self.env()}
        os.environ.update(self.env())  # this process reads the store too (the checks)
        try:
            self.s3.start()
            self.mlflow.start()
            self.tracking_uri = f"http://127.0.0.1:{self.proxy.start()}"
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self.proxy.port:
            self.proxy.stop()
        for server in (self.mlflow, self.s3):
            if server.proc is not None:
                server.stop()
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def env(self) -> dict[str, str]:
        """What a sweep needs to write to the S3 server."""
        return {**S3_ENV, "AWS_ENDPOINT_URL": self.s3.url}


def processes(root: int) -> dict[int, str]:
    """pid -> command line of every process below ``root`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = {}, [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            if pid not in found:
                try:
                    found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                except OSError:
                    continue
                todo.append(pid)
    return {pid: cmd.decode(errors="replace").strip() for pid, cmd in found.items()}


def in_session(sid: int) -> list[int]:
    """The pids of the processes of session ``sid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[3]) == sid:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


class CpuMeter:
    """CPU seconds of this process and of every process below it, each counted at its last
    reading (read every ``every_s``; a process that lived less than that may be missed)."""

    def __init__(self, every_s: float = 1.0):
        self.every_s = every_s
        self._last: dict[tuple[int, float], float] = {}  # (pid, start) -> its CPU seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-meter", daemon=True)
        self._tick = os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._read()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self._read()

    def _read(self) -> None:
        for pid in processes(os.getpid()):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # utime, stime (fields 14, 15) and the start time (22), 1-based in proc(5)
            self._last[pid, float(fields[19])] = (int(fields[11]) + int(fields[12])) / self._tick

    @property
    def seconds(self) -> float:
        own = os.times()
        return own.user + own.system + sum(self._last.values())
