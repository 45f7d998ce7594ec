"""What a sweep folder holds for those who read it (``farm report``, the tests): the store's
read API over finished runs. Writing, scanning and repairing the store is ``store``'s."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from .spec import expand, parse_spec
from .store import Store

__all__ = ["load_sweep"]


def load_sweep(sweep_dir: Path, current: bool = False) -> tuple[pa.Table, list[dict]]:
    """The finished runs of a sweep's results store: their traces concatenated, and their
    summaries. Failed runs are left out; with ``current``, so are runs the stored spec no
    longer expands to (e.g. runs of an optimizer whose ``version`` has been bumped since: its
    results changed on purpose)."""
    store = Store(sweep_dir)
    spec = store.read_spec()  # a damaged file raises DamagedFile (a ValueError) naming it
    if spec is None:
        raise ValueError(f"{sweep_dir} is not a sweep output folder (no sweep.json)")
    records = store.verified().records
    done = sorted(k for k, r in records.items() if r["status"] == "done")
    if current:
        keys = {r.run_key for r in expand(parse_spec(spec, str(sweep_dir)), str(sweep_dir))}
        done = [key for key in done if key in keys]
    if not done:
        raise ValueError(f"{sweep_dir}: no finished run to report on")
    summaries = [records[key]["summary"] for key in done]
    traces = [store.trace(key) for key in done]  # older runs may lack newer columns
    return pa.concat_tables(traces, promote_options="default"), summaries
