"""``farm cluster up/add/down``: a Ray cluster of several nodes on this machine, every listener
on 127.0.0.1, to try ``farm sweep --address`` as on a real cluster (``optfarm.farm.cluster.local``).

Exit codes: 0 done; 1 a node did not start (its log's last line is shown), or no cluster in
--dir; 2 bad input.
"""

from __future__ import annotations

import os
import sys

from .console import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK

__all__ = ["add_cluster_commands"]

DEFAULT_DIR = f"/tmp/optfarm-cluster-{os.getuid()}"  # short: Ray's socket paths live under it


def cmd_up(args) -> int:
    from optfarm.farm.cluster.local import LocalCluster

    if args.nodes < 1 or args.cpus < 1:
        print(
            f"farm: error: --nodes and --cpus must be at least 1 (got {args.nodes}, {args.cpus})",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    cluster = LocalCluster.up(args.dir, args.nodes, args.cpus, args.object_store_mb)
    print(
        f"cluster up: {len(cluster.nodes)} nodes of {args.cpus} CPU at {cluster.address} "
        f"(state and logs in {cluster.root})"
    )
    print(f"  farm sweep SPEC --address {cluster.address}")
    print(f"  farm cluster down --dir {cluster.root}")
    return EXIT_OK


def cmd_add(args) -> int:
    from optfarm.farm.cluster.local import LocalCluster

    cluster = LocalCluster.load(args.dir)
    node = cluster.add_node(args.cpus)
    print(f"node {node.name} joined {cluster.address} ({len(cluster.node_ids())} nodes alive)")
    return EXIT_OK


def cmd_down(args) -> int:
    from optfarm.farm.cluster.local import LocalCluster

    print(f"cluster down: {LocalCluster.load(args.dir).down()} nodes stopped")
    return EXIT_OK


def _reporting_errors(command):
    """``command(args)``, a ``ClusterError`` (no cluster in --dir, a node that did not start)
    reported on one line, exit 1."""

    def run(args) -> int:
        from optfarm.farm.cluster.local import ClusterError

        try:
            return command(args)
        except ClusterError as e:
            print(f"farm: error: {e}", file=sys.stderr)
            return EXIT_FAILED

    return run


def add_cluster_commands(sub) -> None:
    c = sub.add_parser("cluster", help="a multi-node Ray cluster on this machine (loopback)")
    csub = c.add_subparsers(dest="cluster_command", required=True)
    up = csub.add_parser("up", help="start a head and NODES-1 workers, one after another")
    up.add_argument("--nodes", type=int, default=3, help="nodes, the head included (default 3)")
    up.add_argument("--cpus", type=int, default=1, help="CPUs per node (default 1)")
    up.add_argument(
        "--object-store-mb", type=int, default=150, help="object store per node, MB (default 150)"
    )
    up.set_defaults(func=_reporting_errors(cmd_up))
    add = csub.add_parser("add", help="start one more worker node")
    add.add_argument("--cpus", type=int, default=1, help="its CPUs (default 1)")
    add.set_defaults(func=_reporting_errors(cmd_add))
    down = csub.add_parser("down", help="stop every node of the cluster, and their agents")
    down.set_defaults(func=_reporting_errors(cmd_down))
    for p in (up, add, down):
        p.add_argument(
            "--dir",
            default=DEFAULT_DIR,
            help=f"the cluster's state, logs and temp dirs (default {DEFAULT_DIR})",
        )
