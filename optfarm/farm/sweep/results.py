"""What a sweep folder holds for those who read it (``farm report``, the tests): the store's
read API over finished runs. Writing, scanning and repairing the store is ``store``'s."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from optfarm.farm.store.store import Store

from .spec import expand, parse_spec

__all__ = ["load_sweep"]


def load_sweep(
    sweep_dir: Path, current: bool = False, columns: Sequence[str] | None = None
) -> tuple[pa.Table, list[dict]]:
    """The finished runs of a sweep's results store: their traces concatenated, in the order
    of their run keys (only ``columns`` of them, when given: a report reads a third of each
    trace), and their summaries. Failed runs are left out; with ``current``, so are runs the
    stored spec no longer expands to (e.g. runs of an optimizer whose ``version`` has been
    bumped since: its results changed on purpose). Records and traces unchanged since the
    sweep wrote or last verified them are not hashed again, as a resume does
    (``optfarm.farm.store.store.VerifiedFiles``); a damaged one is refused.

    Each run's trace is read from a trace segment that holds it as its record says
    (``optfarm.farm.store.trace_segments``: the sweep wrote them), else from its own file."""
    store = Store(sweep_dir)
    spec = store.read_spec()  # a damaged file raises DamagedFile (a ValueError) naming it
    if spec is None:
        raise ValueError(f"{sweep_dir} is not a sweep output folder (no sweep.json)")
    done, summaries, checksums = _finished_runs(store, spec, sweep_dir, current)
    table = _read_traces(store, done, checksums, columns)
    if columns is not None:
        table = table.select([c for c in columns if c in table.column_names])
    return table, summaries


def _finished_runs(
    store: Store, spec: dict, sweep_dir: Path, current: bool
) -> tuple[list[str], list[dict], dict[str, str | None]]:
    """The run keys of the done runs (those ``spec`` still expands to, with ``current``) in
    order, their summaries and their traces' checksums (None: none). The records themselves
    are let go on return."""
    records = store.verified(trust_unchanged=True).records
    done = sorted(k for k, r in records.items() if r["status"] == "done")
    if current:
        keys = {r.run_key for r in expand(parse_spec(spec, str(sweep_dir)), str(sweep_dir))}
        done = [key for key in done if key in keys]
    if not done:
        raise ValueError(f"{sweep_dir}: no finished run to report on")
    summaries = [records[key]["summary"] for key in done]
    checksums = {key: records[key].get("trace_sha256") for key in done}
    return done, summaries, checksums


def _read_traces(
    store: Store, done: list[str], checksums: dict[str, str | None], columns: Sequence[str] | None
) -> pa.Table:
    """The traces of ``done`` in one table sorted by run key: from trace segments where
    they hold them, else each from its own file."""
    batches, covered = store.read_segments({k: s for k, s in checksums.items() if s}, columns)
    rest = [key for key in done if key not in covered]
    read = None if columns is None else list(dict.fromkeys([*columns, "run_key"]))
    # a thousand traces at a time are made one table, so that 20,000 small tables (each with
    # its own buffers) are never held at once
    for start in range(0, len(rest), _BATCH):
        batches.append(
            pa.concat_tables(
                [store.trace(key, read) for key in rest[start : start + _BATCH]],
                promote_options="default",
            ).combine_chunks()
        )
    # older runs may lack newer columns
    return pa.concat_tables(batches, promote_options="default").sort_by("run_key")


_BATCH = 1000
