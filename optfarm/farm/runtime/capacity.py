"""What a sweep on a cluster can count on while nodes come and go: how many runs to keep in
flight, what to ask the autoscaler for, and when the cluster is lost.

- ``target_actors``: one actor per run in flight, as many as the cluster has CPUs right now
  (polled every ``POLL_S``), never more than ``--max-in-flight`` nor than the runs left.
- ``wanted_cpus``: what to ask the autoscaler for: one CPU per run the sweep could run at
  once (at most ``--max-in-flight`` and the runs left), and no more than the cluster's CPUs
  now plus ``AHEAD`` or 1.1 times them, whichever is more. That is the bound Ray Tune puts on
  a random or grid search (its pending trials, ``TUNE_MAX_PENDING_TRIALS_PG="auto"``: at
  least 200, or 1.1 x the cluster's CPUs), here taken at every poll, so the request grows
  with the nodes that join (about doubling a small cluster at each step) and never names
  the whole sweep: asked for all 20,000 runs of a sweep, Ray's v1 autoscaler monitor (running
  beside every ``ray start --head``) re-read and bin-packed 20,000 entries at every update,
  on the sweep's own CPUs.
- ``Demand`` sends that request and lowers it as the sweep drains, to zero at its end. It
  asks when the demand moved by a step (a tenth), at most once per ``POLL_S`` (the withdrawal
  at once), as one bundle shape with a count where the autoscaler takes that (Ray's
  autoscaler v2: a cluster resource constraint); the v1 autoscaler of a ``cluster.yaml``
  cluster reads a list with one entry per CPU from the head's key-value store
  (``ray.autoscaler.sdk.request_resources`` writes the same). Without an autoscaler the
  request is only recorded by the head, and harmless.
- ``HeadWatch``: the head's GCS port does not accept a connection, or a call to the GCS does
  not answer within ``HEAD_CALL_S``, for ``HEAD_TIMEOUT_S`` seconds -> ``ClusterLost``. Every
  call the sweep makes to the head goes through it, each bounded: Ray's own calls
  (``ray.cluster_resources()``, ``request_resources``) wait up to Ray's 60 s GCS timeout, and
  Ray then ends the driver without a word. A head silent for ``HEAD_WARN_S`` is warned of
  once: on a loaded machine a GCS misses a call now and then and answers the next (a
  leaderboard beside a test suite at load 40: 113 warnings of one missed call each, and no
  head lost).

This module imports Ray only when asked to talk to it (the CLI imports ``ClusterLost``).
"""

from __future__ import annotations

import json
import socket
import sys
import time

__all__ = [
    "AHEAD",
    "HEAD_CALL_S",
    "HEAD_TIMEOUT_S",
    "HEAD_WARN_S",
    "PLACEMENT_TIMEOUT_S",
    "POLL_S",
    "ClusterLost",
    "Demand",
    "HeadWatch",
    "RayStartError",
    "target_actors",
    "wanted_cpus",
]

POLL_S = 1.0  # how often the cluster's CPUs and its head are checked
HEAD_TIMEOUT_S = 10.0  # the head does not answer this long: it is lost
HEAD_CALL_S = 2.0  # one call to the head's GCS gives up after this long
HEAD_WARN_S = 3.0  # the head has not answered this long: say so
PLACEMENT_TIMEOUT_S = 300.0  # runs wait and no actor could be placed this long: give up
STEP = 10  # the autoscaler request moves by a tenth of itself at least
AHEAD = 200  # CPUs asked beyond the cluster's at least (Ray Tune's 200 pending)


class ClusterLost(RuntimeError):
    """The sweep cannot go on on this cluster (its head is gone, or no node can take a run);
    what finished is stored, and the same command resumes the rest."""


class RayStartError(RuntimeError):
    """Ray could not be started here, or the cluster to join does not answer; nothing ran."""


def target_actors(max_in_flight: int, cpus: int, runs_left: int) -> int:
    """Actors to keep: one per CPU of the cluster now, at most ``max_in_flight`` (0: no
    limit) and at most one per run not finished."""
    return max(0, min(max_in_flight or cpus, cpus, runs_left))


def wanted_cpus(max_in_flight: int, cpus: int, runs_left: int) -> int:
    """CPUs to ask the autoscaler for: one per run left, at most ``max_in_flight`` (0: no
    limit), and at most the cluster's ``cpus`` now plus ``max(AHEAD, 1.1 x cpus)``."""
    ahead = cpus + max(AHEAD, int(cpus * 1.1))
    return max(0, min(max_in_flight or runs_left, runs_left, ahead))


class HeadWatch:
    """The head's GCS at ``host:port``: whether it answers, and its bounded calls. Raises
    ``ClusterLost`` once it has not answered for ``timeout`` seconds, after one warning at
    ``HEAD_WARN_S`` (the silence is over at an answer); ``quiet``: no warning
    (the watching parent of a driver, ``optfarm.farm.runtime.driver``)."""

    def __init__(self, gcs_address: str, timeout: float = HEAD_TIMEOUT_S, quiet: bool = False):
        host, _, port = gcs_address.rpartition(":")
        self.address = gcs_address
        self.host, self.port, self.timeout, self.quiet = host, int(port), timeout, quiet
        self.lost_since: float | None = None
        self.warned = False  # of the present silence
        self._gcs = None

    def reachable(self) -> bool:
        try:
            socket.create_connection((self.host, self.port), timeout=1.0).close()
            return True
        except OSError:
            return False

    def check(self) -> bool:
        """Whether the head answers now; raises once it has not answered for too long."""
        if self.reachable():
            self.lost_since = None
            return True
        self.missed()
        return False

    def missed(self, why: str = "no answer") -> None:
        """The head did not answer (a refused connection, a call that timed out)."""
        now = time.monotonic()
        if self.lost_since is None:
            self.lost_since, self.warned = now, False
            return
        silent = now - self.lost_since
        if silent >= self.timeout:
            raise ClusterLost(
                f"lost the Ray head {self.host}:{self.port} ({why} for {silent:.0f} s)"
            )
        if silent >= HEAD_WARN_S and not (self.quiet or self.warned):
            self.warned = True
            print(
                f"farm: warning: the Ray head {self.host}:{self.port} has not answered for "
                f"{silent:.0f} s; giving up in {self.timeout - silent:.0f} s",
                file=sys.stderr,
            )

    # -- bounded calls to the GCS (they need Ray) ------------------------------------------
    @property
    def gcs(self):
        if self._gcs is None:
            from optfarm.farm.runtime.ray_private import gcs_client

            self._gcs = gcs_client(self.address)
        return self._gcs

    def cpus(self) -> int | None:
        """CPUs of the nodes alive now; None when the head did not answer in ``HEAD_CALL_S``."""
        totals = self._alive_totals()
        return None if totals is None else int(sum(t.get("CPU", 0) for t in totals))

    def largest(self, resource: str) -> float | None:
        """The most of ``resource`` (e.g. ``memory``, in bytes) one node alive now has; None
        when the head did not answer in ``HEAD_CALL_S`` or no node has it."""
        totals = self._alive_totals()
        return max((t[resource] for t in totals or () if resource in t), default=None)

    def _alive_totals(self) -> list | None:
        """Each alive node's total resources; None when the head did not answer."""
        from ray.core.generated.gcs_pb2 import GcsNodeInfo
        from ray.exceptions import RayError

        try:  # not Exception: a private name an upgrade dropped is no lost head
            nodes = self.gcs.get_all_node_info(timeout=HEAD_CALL_S).values()
        except (RayError, OSError) as e:  # a timeout (RpcError), an unavailable GCS
            self.missed(f"{type(e).__name__} from its GCS")
            return None
        return [n.resources_total for n in nodes if n.state == GcsNodeInfo.ALIVE]


class Demand:
    """The CPUs this sweep asks the autoscaler for (see the module docstring)."""

    def __init__(self, head: HeadWatch | None, every: float = POLL_S):
        self.head, self.every = head, every
        self.requested: int | None = None
        self.sent_at = -float("inf")
        self.sent = 0  # requests written to the head
        self._v2 = None

    def request(self, cpus: int) -> None:
        """Ask for ``cpus`` CPUs: at once to withdraw (0); otherwise once the request moved by
        a step (a tenth of what was asked, at least one CPU) and ``every`` seconds passed
        since the last one."""
        now = time.monotonic()
        if self.head is None or cpus == self.requested:
            return
        if (
            cpus
            and self.requested is not None
            and (
                now - self.sent_at < self.every
                or abs(cpus - self.requested) < max(1, self.requested // STEP)
            )
        ):
            return
        from ray.exceptions import RayError

        try:
            self._send(cpus)
        except (RayError, OSError) as e:  # a timeout (RpcError): the head did not answer
            self.head.missed(f"{type(e).__name__} from its GCS")
            return
        self.requested, self.sent_at = cpus, now
        self.sent += 1

    def _send(self, cpus: int) -> None:
        from optfarm.farm.runtime.ray_private import autoscaler_v1_channel, autoscaler_v2_keys

        gcs = self.head.gcs
        if self._v2 is None:  # as ray.autoscaler.v2.utils.is_autoscaler_v2 asks, bounded
            self._v2 = gcs.internal_kv_get(*autoscaler_v2_keys(), timeout=HEAD_CALL_S) == b"1"
        if self._v2:  # one shape and its count (as ray.autoscaler.v2.sdk sends it)
            shapes = ([{"CPU": 1.0}], [{}], [cpus]) if cpus else ([], [], [])
            gcs.request_cluster_resource_constraint(*shapes, timeout_s=HEAD_CALL_S)
            return
        gcs.internal_kv_put(
            autoscaler_v1_channel(),
            json.dumps([{"CPU": 1}] * cpus).encode(),
            True,
            None,
            timeout=HEAD_CALL_S,
        )
