"""Ray and process fixtures for the farm tests.

Ray stays on 127.0.0.1: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (set before Ray is imported)
makes a local Ray use the loopback address for every server it starts. Ray is started once per
module (``ray_local``); processes a test starts are stopped by their process group id.
"""

from __future__ import annotations

import contextlib
import io
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

os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_AUTH_MODE", "token")  # Ray's default for a local cluster, made explicit
os.environ.pop("RAY_ADDRESS", None)
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # no traffic but to 127.0.0.1

import pytest  # noqa: E402

from optfarm.farm.run.loop import TIMING_COLUMNS  # noqa: E402
from optfarm.farm.runtime.ports import free_ports  # noqa: E402


@pytest.fixture(scope="module")
def ray_local():
    """A local two-CPU Ray on 127.0.0.1 for the whole test module."""
    import ray

    from optfarm.farm.runtime.ray_setup import start_local_ray

    if ray.is_initialized():
        ray.shutdown()
    start_local_ray(2, log_to_driver=False)  # retried: a loaded machine can fail a start
    yield ray
    ray.shutdown()


@contextlib.contextmanager
def loopback_cluster(nodes: int, prefix: str, cpus: int = 1):
    """``farm cluster up --nodes N`` in a new folder under /tmp (short: Ray's socket paths),
    as a ``LocalCluster``; ``farm cluster down`` after, which must leave no process of any
    node. A node that does not start fails the caller with its own cause (the CLI's line),
    and the folder is removed whatever happens."""
    from optfarm.farm.cli import main
    from optfarm.farm.cluster.local import STATE, LocalCluster, loopback_name

    if loopback_name() is None:
        pytest.skip("no host name of this machine resolves to 127.0.0.1")
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(
                ["cluster", "up", "--nodes", str(nodes), "--cpus", str(cpus), "--dir", str(root)]
            )
        if code:
            pytest.fail(f"farm cluster up exited with {code}: {err.getvalue().strip()}")
        cluster = LocalCluster.load(root)
        try:
            yield cluster
        finally:
            started = LocalCluster.load(root).nodes if (root / STATE).exists() else []
            if started:
                assert main(["cluster", "down", "--dir", str(root)]) == 0
            assert not any(n.alive() for n in started)  # agents included: whole groups
    finally:
        shutil.rmtree(root, ignore_errors=True)


def free_port() -> int:
    return free_ports(1)[0]


def ray_bin() -> str:
    return shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"


def start_ray_head(tmp: Path, num_cpus: int) -> tuple[subprocess.Popen, int]:
    """``ray start --head`` on 127.0.0.1 in its own process group, state under ``tmp`` (keep
    it short: Ray's socket paths); (the process, its port) once it listens."""
    port = free_port()
    head = start_group(
        [
            ray_bin(),
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            f"--num-cpus={num_cpus}",
            "--include-dashboard=false",
            f"--temp-dir={tmp / 'ray'}",
            "--disable-usage-stats",
        ],
        tmp / "head.log",
        {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
    )
    try:
        wait_for_port(port, head, 120, tmp / "head.log")
    except BaseException:
        stop_groups([head])
        raise
    return head, port


class MlflowServer:
    """A real ``mlflow server`` on 127.0.0.1 (sqlite backend and artifacts under ``root``),
    stopped by its process group id."""

    def __init__(self, root: Path):
        self.root, self.port = root, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self):
        mlflow = shutil.which("mlflow", path=str(Path(sys.executable).parent))
        self.proc = start_group(
            [
                mlflow or "mlflow",
                "server",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--backend-store-uri",
                f"sqlite:///{self.root / 'mlflow.db'}",
                "--artifacts-destination",
                (self.root / "artifacts").as_uri(),
                "--workers",
                "1",
            ],
            self.root / "server.log",
        )
        wait_for_port(self.port, self.proc, 240, self.root / "server.log")
        urllib.request.urlopen(self.url + "/health", timeout=30).read()

    def stop(self):
        stop_groups([self.proc])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = MlflowServer(tmp_path_factory.mktemp("mlflow-server"))
    s.start()
    yield s
    s.stop()


class S3Server:
    """A real S3-compatible server on 127.0.0.1: moto's standalone server (``moto_server``,
    from the ``test`` extra), stopped by its process group id. ``env`` points S3 clients at it
    (``pyarrow.fs`` and boto3 both read ``AWS_ENDPOINT_URL``) with dummy keys."""

    def __init__(self, root: Path):
        self.root, self.port = root, free_port()
        self.env = {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}",
            "AWS_ACCESS_KEY_ID": "optfarm-test",
            "AWS_SECRET_ACCESS_KEY": "optfarm-test",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        self.proc = None

    def start(self):
        binary = shutil.which("moto_server", path=str(Path(sys.executable).parent))
        if binary is None:
            pytest.skip("moto's server is not installed (pip install -e '.[test]')")
        self.proc = start_group(
            [binary, "-H", "127.0.0.1", "-p", str(self.port)], self.root / "moto.log"
        )
        wait_for_port(self.port, self.proc, 60, self.root / "moto.log")

    def bucket(self, name: str) -> str:
        """A new bucket ``name``; its ``s3://`` URI."""
        import boto3

        boto3.client(
            "s3",
            endpoint_url=self.env["AWS_ENDPOINT_URL"],
            region_name="us-east-1",
            aws_access_key_id="optfarm-test",
            aws_secret_access_key="optfarm-test",
        ).create_bucket(Bucket=name)
        return f"s3://{name}"

    def stop(self):
        stop_groups([self.proc])


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """The S3 server, with this process's environment pointing S3 clients at it (and the
    machine-local folders of URI outputs, ``$OPTFARM_DATA/outs``, in a temporary folder)."""
    server = S3Server(tmp_path_factory.mktemp("s3"))
    server.start()
    with pytest.MonkeyPatch.context() as env:
        for k, v in server.env.items():
            env.setenv(k, v)
        env.setenv("OPTFARM_DATA", str(tmp_path_factory.mktemp("optfarm-data")))
        try:
            yield server
        finally:
            server.stop()


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float, log: Path) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def start_group(args: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
    """Start ``args`` in a new session (its own process group), output to ``log``."""
    return subprocess.Popen(
        args,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )


def stop_groups(procs: list[subprocess.Popen], grace: float = 5.0) -> None:
    """SIGTERM the process groups we started, then SIGKILL what lingers after ``grace`` s."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        alive = []
        for proc in procs:
            try:
                os.killpg(proc.pid, sig)
                alive.append(proc)
            except ProcessLookupError:
                pass
        end = time.monotonic() + wait
        while alive and time.monotonic() < end:
            time.sleep(0.2)
            alive = [p for p in alive if _group_alive(p)]
        if not alive:
            break
    for proc in procs:
        proc.poll()


def _group_alive(proc: subprocess.Popen) -> bool:
    proc.poll()
    try:
        os.killpg(proc.pid, 0)
        return True
    except ProcessLookupError:
        return False


def descendants(root: int) -> set[int]:
    """PIDs of every process below ``root`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), ()):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


LOOPBACK = ("127.0.0.1", "::ffff:127.0.0.1", "::1")
TIMING = TIMING_COLUMNS


def same_trace(a, b) -> bool:
    """Equal traces (pyarrow tables) but for the wall-clock timing columns; NaN equals NaN."""
    return a.schema == b.schema and a.drop_columns(list(TIMING)).to_pandas().equals(
        b.drop_columns(list(TIMING)).to_pandas()
    )


def listeners_of(pids: set[int]) -> list[tuple[str, int]]:
    """(local address, pid) of every listening TCP socket owned by one of ``pids``."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split()
        for chunk in line.split("pid=")[1:]:
            pid = int(chunk.split(",")[0])
            if pid in pids:
                found.append((parts[3], pid))
    return found
