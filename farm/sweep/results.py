"""What a sweep folder holds for those who read it (``farm report``, the tests): the store's
read API over finished runs. Writing, scanning and repairing the store is ``store``'s."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from .spec import expand, parse_spec
from .store import Store

__all__ = ["load_sweep"]


def load_sweep(sweep_dir: Path, current: bool = False,
               columns: Sequence[str] | None = None) -> tuple[pa.Table, list[dict]]:
    """The finished runs of a sweep's results store: their traces concatenated (only
    ``columns`` of them, when given: a 20,000-run report reads a quarter of each trace), and
    their summaries. Failed runs are left out; with ``current``, so are runs the stored spec no
    longer expands to (e.g. runs of an optimizer whose ``version`` has been bumped since: its
    results changed on purpose). Records and traces unchanged since the sweep wrote or last
    verified them are not hashed again, as a resume does (``farm.sweep.store.VerifiedFiles``);
    a damaged one is refused."""
    store = Store(sweep_dir)
    spec = store.read_spec()  # a damaged file raises DamagedFile (a ValueError) naming it
    if spec is None:
        raise ValueError(f"{sweep_dir} is not a sweep output folder (no sweep.json)")
    records = store.verified(trust_unchanged=True).records
    done = sorted(k for k, r in records.items() if r["status"] == "done")
    if current:
        keys = {r.run_key for r in expand(parse_spec(spec, str(sweep_dir)), str(sweep_dir))}
        done = [key for key in done if key in keys]
    if not done:
        raise ValueError(f"{sweep_dir}: no finished run to report on")
    summaries = [records[key]["summary"] for key in done]
    del records
    # older runs may lack newer columns; a thousand traces at a time are made one table, so
    # that 20,000 small tables (each with its own buffers) are never held at once
    batches = []
    for start in range(0, len(done), _BATCH):
        batches.append(pa.concat_tables([store.trace(key, columns)
                                         for key in done[start:start + _BATCH]],
                                        promote_options="default").combine_chunks())
    return pa.concat_tables(batches, promote_options="default"), summaries


_BATCH = 1000
