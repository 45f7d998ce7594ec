"""A Ray cluster of several nodes on this one machine, for trying the cluster path of a sweep
(``farm cluster up/down``) and for the cluster tests.

Every node is a ``ray start --block`` in its own session (process group), with its own temp
dir and its own ports, started one after another (two nodes started at the same moment clash
on their ports). Stopping a node ends its whole process group, and so does the node itself
when its raylet exits (e.g. the head is lost), so no dashboard or runtime-env agent of it is
left behind. The state (address, each node's process group and temp dir) is kept in
``cluster.json`` in the cluster's folder.

Every listener stays on loopback. The head binds 127.0.0.1 with
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``; a joining node needs that flag at 1, and then Ray
rewrites a literal "127.0.0.1" into the machine's external address, so it joins through a host
name of this machine that resolves to 127.0.0.1 (e.g. its own name in /etc/hosts).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from optfarm.farm.runtime.ports import free_ports
from optfarm.farm.runtime.ray_setup import load_stretch, start_pause
from optfarm.oracle.atomic_files import write_file_atomically

__all__ = ["ClusterError", "LocalCluster", "Node", "loopback_name", "start_schedule"]

STATE = "cluster.json"
START_TRIES = 5
# what a node's log ends with when Ray gave up waiting for one of its processes at start-up
_START_TIMEOUTS = ("timed out during startup", "Timed out waiting for file")
# the ports each node's servers would otherwise take from Ray's fixed defaults
_PORT_FLAGS = (
    "--node-manager-port",
    "--object-manager-port",
    "--metrics-export-port",
    "--dashboard-agent-grpc-port",
    "--dashboard-agent-listen-port",
    "--runtime-env-agent-port",
)
_HEAD_PORT_FLAGS = ("--ray-client-server-port", "--dashboard-port")


class ClusterError(RuntimeError):
    """A node did not start, or the cluster's folder is not usable."""


@dataclass
class Node:
    name: str
    pid: int  # leader of the node's process group (a shell around ``ray start --block``)
    temp_dir: str
    cpus: int

    def alive(self) -> bool:
        """Whether any process of the node's group still runs."""
        return _group_alive(self.pid)


@dataclass
class LocalCluster:
    """The nodes of a loopback cluster kept in ``root`` (see the module docstring)."""

    root: Path
    port: int = 0
    join_host: str = ""
    object_store_mb: int = 150
    auth_mode: str = field(default_factory=lambda: os.environ.get("RAY_AUTH_MODE", "disabled"))
    nodes: list[Node] = field(default_factory=list)

    @property
    def address(self) -> str:
        """What a driver on this machine passes to ``ray.init`` / ``farm sweep --address``."""
        return f"127.0.0.1:{self.port}"

    # -- state -------------------------------------------------------------------------------
    @classmethod
    def load(cls, root: str | Path) -> LocalCluster:
        path = Path(root) / STATE
        if not path.exists():
            raise ClusterError(f"{root}: no cluster here (no {STATE})")
        data = json.loads(path.read_text())
        nodes = [Node(**n) for n in data.pop("nodes")]
        return cls(root=Path(root), nodes=nodes, **{k: v for k, v in data.items() if k != "root"})

    def save(self) -> None:
        data = {k: v for k, v in asdict(self).items() if k != "root"}
        write_file_atomically(self.root / STATE, json.dumps(data, indent=1))

    # -- starting and stopping nodes ---------------------------------------------------------
    @classmethod
    def up(
        cls,
        root: str | Path,
        nodes: int = 3,
        cpus: int = 1,
        object_store_mb: int = 150,
        timeout: float = 120.0,
    ) -> LocalCluster:
        """Start a head and ``nodes - 1`` workers of ``cpus`` CPUs each, one after another."""
        if nodes < 1 or cpus < 1:
            raise ClusterError(f"--nodes and --cpus must be at least 1 (got {nodes}, {cpus})")
        root = Path(root)
        if (root / STATE).exists() and any(n.alive() for n in cls.load(root).nodes):
            raise ClusterError(f"{root}: a cluster is already up here (farm cluster down)")
        host = loopback_name()
        if host is None:
            raise ClusterError(
                "no host name of this machine resolves to 127.0.0.1 (add one to "
                "/etc/hosts): a joining node could not stay on loopback"
            )
        root.mkdir(parents=True, exist_ok=True)
        cluster = cls(root, port=free_ports(1)[0], join_host=host, object_store_mb=object_store_mb)
        try:
            cluster._start("head", cpus, timeout)
            for _ in range(nodes - 1):
                cluster.add_node(cpus, timeout)
        except BaseException:
            cluster.down()
            raise
        return cluster

    def add_node(self, cpus: int = 1, timeout: float = 120.0) -> Node:
        """Start one more worker node and wait until the cluster counts it."""
        return self._start(f"worker{len(self.nodes)}", cpus, timeout)

    def _start(self, name: str, cpus: int, timeout: float) -> Node:
        """Start node ``name``; again (``start_schedule``'s tries at the load of the moment,
        one line each, a pause growing between) when Ray gave up on it at start-up, as
        ``optfarm.farm.runtime.ray_setup.start_local_ray`` does for a local Ray: ``ray start`` waits
        a fixed 30 s for its raylet to register, and the raylet 15 s for its dashboard agent
        (Ray 2.60 starts one on every node, dashboard or not: ``--include-dashboard=false``
        leaves it), both too short on a machine busy with other work."""
        attempt, tries = 1, START_TRIES
        while True:
            try:
                return self._start_once(name, cpus, timeout)
            except ClusterError as e:
                tries, pause = start_schedule(attempt, tries)
                if not any(why in str(e) for why in _START_TIMEOUTS) or attempt >= tries:
                    raise
                print(
                    f"farm: node {name} did not start ({e}); starting it again in "
                    f"{pause:.0f} s ({attempt + 1}/{tries})",
                    file=sys.stderr,
                    flush=True,
                )
                time.sleep(pause)  # a burst of load may pass
                attempt += 1

    def _start_once(self, name: str, cpus: int, timeout: float) -> Node:
        temp_dir = self.root / name
        shutil.rmtree(temp_dir, ignore_errors=True)
        flags = _PORT_FLAGS + (_HEAD_PORT_FLAGS if name == "head" else ())
        ports = free_ports(len(flags), taken={self.port})
        args = [
            _ray_cli(),
            "start",
            "--block",
            f"--num-cpus={cpus}",
            "--disable-usage-stats",
            f"--object-store-memory={self.object_store_mb * 2**20}",
            f"--temp-dir={temp_dir}",
            *(f"{f}={p}" for f, p in zip(flags, ports)),
        ]
        if name == "head":
            args += [
                "--head",
                "--node-ip-address=127.0.0.1",
                f"--port={self.port}",
                "--include-dashboard=false",
            ]
            env = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        else:
            args += [f"--address={self.join_host}:{self.port}"]
            env = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"}
        env["RAY_AUTH_MODE"] = self.auth_mode  # every node as the head (token: ~/.ray/auth_token)
        if self.auth_mode == "token":  # a first run: `ray start` does not make the token
            from optfarm.farm.runtime.ray_setup import ensure_auth_token

            ensure_auth_token()
        log = self.root / f"{name}.log"
        # when the node ends (its raylet lost the head, or crashed) the shell ends what is left of
        # its process group: Ray leaves a node's dashboard and runtime-env agents running
        proc = subprocess.Popen(
            ["sh", "-c", '"$@"; kill -KILL 0', name, *args],
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **env},
            start_new_session=True,
        )
        node = Node(name, proc.pid, str(temp_dir), cpus)
        self.nodes.append(node)
        self.save()
        try:
            self._wait_joined(node, proc, log, timeout)
        except BaseException:
            _stop_group(node.pid, signal.SIGTERM, 5.0)
            self.nodes.remove(node)
            self.save()
            raise
        return node

    def _wait_joined(self, node: Node, proc: subprocess.Popen, log: Path, timeout: float) -> None:
        """Until the head's GCS lists ``node`` alive."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if proc.poll() is not None:
                raise ClusterError(
                    f"node {node.name} exited with {proc.returncode}: " + _cause(node, log)
                )
            if node.name in self.node_ids():
                return
            time.sleep(0.5)
        raise ClusterError(
            f"node {node.name} did not join within {timeout:.0f} s: " + _last_line(log)
        )

    def node_ids(self) -> dict[str, str]:
        """Ray's node id of each of our nodes the head's GCS lists alive (none while the head
        does not answer)."""
        from ray.core.generated.gcs_pb2 import GcsNodeInfo
        from ray.exceptions import RayError

        from optfarm.farm.runtime.ray_private import gcs_client

        try:  # a plain connection first: Ray's client warns while nothing listens
            socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
            infos = gcs_client(self.address).get_all_node_info(timeout=5).values()
        except (RayError, OSError):  # not up yet, or gone
            return {}
        names = {n.temp_dir: n.name for n in self.nodes}
        return {
            names[i.temp_dir]: i.node_id.hex()
            for i in infos
            if i.state == GcsNodeInfo.ALIVE and i.temp_dir in names
        }

    def stop_node(self, name: str, sig: int = signal.SIGTERM, grace: float = 5.0) -> None:
        """End node ``name``'s process group (``SIGKILL``: a crash), then anything left of it."""
        node = next(n for n in self.nodes if n.name == name)
        _stop_group(node.pid, sig, grace)

    def down(self, grace: float = 5.0) -> int:
        """Stop every node (workers first), remove the temp dirs; the number stopped."""
        stopped = 0
        for node in reversed(self.nodes):
            if node.alive():
                stopped += 1
            _stop_group(node.pid, signal.SIGTERM, grace)
            shutil.rmtree(node.temp_dir, ignore_errors=True)
        (self.root / STATE).unlink(missing_ok=True)
        return stopped


def start_schedule(attempt: int, tries: int = START_TRIES) -> tuple[int, float]:
    """(tries, pause before the next) after failed start ``attempt``, at the machine's load now:
    ``START_TRIES`` while the load average per core is at most ``LOADED_PER_CORE``; above it,
    a try more per ``LOADED_PER_CORE`` (at most twice the tries); the pause is a local Ray's
    (``optfarm.farm.runtime.ray_setup.start_pause``, ``MAX_PAUSE_S`` at most): on a machine
    that busy a node's Python agents need more than Ray's fixed waits, and only a lull lets
    them start. ``tries`` never shrinks once grown."""
    stretch = load_stretch()
    tries = max(tries, min(2 * START_TRIES, START_TRIES + int(stretch) - 1))
    return tries, start_pause(attempt)


def _stop_group(pgid: int, sig: int, grace: float) -> None:
    """Send ``sig`` to the process group, then SIGKILL it if anything is left after ``grace`` s."""
    for s, wait in ((sig, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, s)
        except ProcessLookupError:
            return
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if not _group_alive(pgid):
                return
            time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` runs (zombies waiting to be reaped do not count)."""
    try:
        os.waitpid(pgid, os.WNOHANG)  # the group's leader, when we started it
    except ChildProcessError:
        pass
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == pgid and state != "Z":
            return True
    return False


def loopback_name() -> str | None:
    """A name of this machine (not "localhost") that resolves to 127.0.0.1, if there is one."""
    for name in (socket.gethostname(), socket.getfqdn()):
        try:
            if name and name != "localhost" and socket.gethostbyname(name) == "127.0.0.1":
                return name
        except OSError:
            continue
    return None


def _ray_cli() -> str:
    return shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"


def _cause(node: Node, log: Path) -> str:
    """The last line of the node's log, and the raylet's own reason when it gave up waiting
    for its agent (it is in the raylet's log only)."""
    raylet = Path(node.temp_dir) / "session_latest" / "logs" / "raylet.out"
    try:
        agent = [
            x
            for x in raylet.read_text(errors="replace").splitlines()
            if "Timed out waiting for file" in x
        ]
    except OSError:
        agent = []
    why = _last_line(log)
    return f"{why} (its raylet timed out waiting for its dashboard agent)" if agent else why


def _last_line(log: Path) -> str:
    lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip()]
    return lines[-1].strip() if lines else "(no output)"
