"""A sweep's own run in MLflow, the parent of its variant runs: tagged with the sweep's id
(``optfarm.sweep_id``, kept in ``sweep.json``, so it moves with the folder) and found by it
(``find``) before one is created (``create``), so that a moved or copied folder, a lost cache,
a killed driver or a second ``farm sync`` finds the run already there. Its span covers every
invocation that logged something: it is created starting at the earliest stored run, marked
RUNNING when an invocation starts and ended when it ends. ``farm report`` attaches its files
to it (``log_artifacts``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from optfarm.farm.store.store import Store
from optfarm.farm.tracking.mlflow_connection import Connection
from optfarm.farm.tracking.strays import choose

__all__ = ["create", "find", "log_artifacts", "sweep_filter"]


def sweep_filter(sweep_id: str) -> str:
    """The search that finds the sweep's own run."""
    return f"tags.`optfarm.sweep_id` = '{sweep_id}' and tags.`optfarm.kind` = 'sweep'"


def find(conn: Connection, sweep_id: str, known: str | None = None) -> str | None:
    """The id of the sweep's run, or None; should there be several (strays), ``known`` (the
    one the folder's cache names), else a finished one, else the earliest."""
    found = conn.search(sweep_filter(sweep_id))
    return choose(found, known).info.run_id if found else None


def create(
    conn: Connection,
    store: Store,
    name: str,
    sweep_id: str,
    start_ms: int,
    params: dict[str, Any],
    artifacts: bool,
) -> str:
    """Create the sweep's run ``name`` starting at ``start_ms``, with the sweep's ``params``
    (and its ``sweep.json`` attached, with ``artifacts``); its id."""
    from mlflow.entities import Param

    tags = {
        "optfarm.sweep": name,
        "optfarm.sweep_id": sweep_id,
        "optfarm.kind": "sweep",
        "optfarm.out": store.location.absolute(),
    }
    run_id = conn.create_run(name, start_ms, tags, sweep_filter(sweep_id))
    conn.client.log_batch(run_id, params=[Param(k, str(v)) for k, v in sorted(params.items())])
    if artifacts and store.read_sweep() is not None:
        with store.local_copy(store.root / "sweep.json") as spec:
            conn.client.log_artifact(run_id, str(spec))
    return run_id


def log_artifacts(
    conn: Connection, sweep_id: str, files: list[Path], artifact_path: str
) -> str | None:
    """Attach ``files`` to the sweep's run under ``artifact_path``; its id, or None when the
    sweep has no run there or tracking fails (said once, ``Connection.warn``)."""
    if not conn.open():
        return None
    try:
        parent = find(conn, sweep_id)
        if parent is None:
            return None
        for f in files:
            conn.client.log_artifact(parent, str(f), artifact_path)
    except Exception as e:
        conn.warn("log artifacts", e)
        return None
    return parent
