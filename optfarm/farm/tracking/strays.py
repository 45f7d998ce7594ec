"""Strays: a second MLflow run of one key of a sweep (its own run, a variant's or a run key's),
made when a create was carried out twice: by an older optfarm, whose MLflow client retried a
create answered after its request timeout, or now by a create whose answer was lost and that
the server carried out only after the look-up that should have found it
(``Connection.create_run``).

``reconcile`` leaves one run per key: the one the tracker logs to, else a finished one, else
the earliest. The others are deleted (MLflow's delete: out of every search and of the UI, and
restorable), after the runs nested in one are moved under the run kept; one line on stderr
says how many.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from optfarm.farm.tracking.mlflow_connection import Connection
from optfarm.farm.tracking.uris import hide_password

__all__ = ["choose", "key_of", "reconcile"]

KEY_TAGS = {"sweep": None, "variant": "optfarm.variant_key", "run": "optfarm.run_key"}
_RANK = {"FINISHED": 0, "FAILED": 1, "KILLED": 2, "RUNNING": 3}  # which run of a key to keep
_PARENT = "mlflow.parentRunId"


def key_of(run) -> tuple[str, str] | None:
    """(kind, key) of one of a sweep's runs (the key "" for the sweep's own run); None for a
    run the farm did not make."""
    kind = run.data.tags.get("optfarm.kind")
    if kind not in KEY_TAGS:
        return None
    tag = KEY_TAGS[kind]
    return kind, "" if tag is None else run.data.tags.get(tag, "")


def choose(runs: list, known: str | None = None):
    """The run to keep of several of one key: ``known`` (the one logged to), else a finished
    one, else the earliest."""
    return min(
        runs,
        key=lambda r: (
            r.info.run_id != known,
            _RANK.get(r.info.status, len(_RANK)),
            r.info.start_time,
            r.info.run_id,
        ),
    )


def reconcile(conn: Connection, sweep_id: str, known: Mapping[tuple[str, str], str]) -> list:
    """Delete the strays of the sweep ``sweep_id`` (the module docstring); ``known``: (kind,
    key) -> the id of the run the tracker logs to. Returns the runs kept (as searched)."""
    groups: dict[tuple[str, str], list] = {}
    for r in conn.search(f"tags.`optfarm.sweep_id` = '{sweep_id}'"):
        key = key_of(r)
        if key is not None:
            groups.setdefault(key, []).append(r)
    kept, replaced = [], {}  # replaced: stray's id -> the id kept for its key
    for key, runs in groups.items():
        keep = choose(runs, known.get(key))
        kept.append(keep)
        replaced.update({r.info.run_id: keep.info.run_id for r in runs if r is not keep})
    if replaced:
        _delete(conn, kept, replaced)
    return kept


def _delete(conn: Connection, kept: list, replaced: Mapping[str, str]) -> None:
    """Move the runs nested in a stray under the run kept for its key, delete the strays,
    and say so in one line."""
    for r in kept:
        parent = r.data.tags.get(_PARENT)
        if parent in replaced:
            conn.client.set_tag(r.info.run_id, _PARENT, replaced[parent])
    for run_id in replaced:
        conn.client.delete_run(run_id)
    print(
        f"farm: MLflow at {hide_password(conn.uri)}: {len(replaced)} stray run(s) of the sweep "
        "deleted (a create carried out twice); one run per key is kept",
        file=sys.stderr,
    )
