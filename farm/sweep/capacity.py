"""What a sweep on a cluster can count on while nodes come and go: how many runs to keep in
flight, what to ask the autoscaler for, and when the cluster is lost.

- ``target_actors``: one actor per run in flight, as many as the cluster has CPUs right now
  (polled every ``POLL_S``), never more than ``--max-in-flight`` nor than the runs left.
- ``Demand`` asks the autoscaler (``ray.autoscaler.sdk.request_resources``) for one CPU per
  run the sweep could run at once, and lowers the request as the sweep drains, to zero at
  its end. Without an autoscaler the request is only recorded by the head, and harmless.
- ``HeadWatch``: the head's GCS port does not accept a connection for ``HEAD_TIMEOUT_S``
  seconds -> ``ClusterLost``. Ray itself would end the driver only after its own 60 s GCS
  timeout, without a word; the sweep instead stops in time to write its index and close its
  MLflow run.

This module imports Ray only when asked to talk to it (the CLI imports ``ClusterLost``).
"""

from __future__ import annotations

import socket
import sys
import time

__all__ = ["HEAD_TIMEOUT_S", "PLACEMENT_TIMEOUT_S", "POLL_S", "ClusterLost", "Demand",
           "HeadWatch", "target_actors"]

POLL_S = 1.0                 # how often the cluster's CPUs and its head are checked
HEAD_TIMEOUT_S = 10.0        # the head does not answer this long: it is lost
PLACEMENT_TIMEOUT_S = 300.0  # runs wait and no actor could be placed this long: give up


class ClusterLost(RuntimeError):
    """The sweep cannot go on on this cluster (its head is gone, or no node can take a run);
    what finished is stored, and the same command resumes the rest."""


def target_actors(max_in_flight: int, cpus: int, runs_left: int) -> int:
    """Actors to keep: one per CPU of the cluster now, at most ``max_in_flight`` (0: no
    limit) and at most one per run not finished."""
    return max(0, min(max_in_flight or cpus, cpus, runs_left))


class Demand:
    """The CPUs this sweep asks the autoscaler for (see the module docstring)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.requested: int | None = None

    def request(self, cpus: int) -> None:
        if not self.enabled or cpus == self.requested:
            return
        from ray.autoscaler.sdk import request_resources

        request_resources(num_cpus=cpus)  # replaces the previous request; 0 withdraws it
        self.requested = cpus


class HeadWatch:
    """Raises ``ClusterLost`` once the head's GCS (``host:port``) has refused or ignored
    connections for ``timeout`` seconds."""

    def __init__(self, gcs_address: str, timeout: float = HEAD_TIMEOUT_S):
        host, _, port = gcs_address.rpartition(":")
        self.host, self.port, self.timeout = host, int(port), timeout
        self.lost_since: float | None = None

    def reachable(self) -> bool:
        try:
            socket.create_connection((self.host, self.port), timeout=1.0).close()
            return True
        except OSError:
            return False

    def check(self) -> bool:
        """Whether the head answers now; raises once it has not answered for too long."""
        now = time.monotonic()
        if self.reachable():
            self.lost_since = None
            return True
        if self.lost_since is None:
            self.lost_since = now
            print(f"farm: warning: the Ray head {self.host}:{self.port} does not answer; "
                  f"giving up in {self.timeout:.0f} s", file=sys.stderr)
        elif now - self.lost_since >= self.timeout:
            raise ClusterLost(f"lost the Ray head {self.host}:{self.port} (no answer for "
                              f"{now - self.lost_since:.0f} s)")
        return False
