"""Ports free on 127.0.0.1, picked once for the farm: the local cluster's Ray nodes
(``optfarm.farm.cluster.local``) and the tracking-server benchmark's MLflow and PostgreSQL servers
(``optfarm.farm.bench.tracking_server``) take theirs here."""

from __future__ import annotations

import socket
from contextlib import ExitStack

__all__ = ["free_ports"]


def free_ports(count: int, taken: set[int] = frozenset()) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 now, none of them in ``taken``. The sockets
    stay bound until all are chosen: a port closed again may be handed out again, and a Ray
    node given one port for two of its flags does not start ("... is trying to use a port
    number ... that is used by other components")."""
    with ExitStack() as bound:
        ports: list[int] = []
        while len(ports) < count:
            s = bound.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))
            if s.getsockname()[1] not in taken:
                ports.append(s.getsockname()[1])
        return ports
