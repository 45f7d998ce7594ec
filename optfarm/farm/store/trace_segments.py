"""Trace segments: the traces of a sweep's finished runs again, a thousand runs to a file
(``traces/<sha256>.parquet`` in the store), so that a report of 20,000 runs reads 20 files
instead of opening 20,000 traces (each costs a Parquet footer to parse, about 0.3 ms, and on an
object store a request).

Segments are copies, never the truth: a run is finished when its record and its own trace in
``runs/`` are intact (``optfarm.farm.store.store``). A reader takes a run's rows from a segment only
when the segment's bytes hash to its name (a damaged segment is passed over whole) and the
segment lists the run with the trace checksum the run's record holds now (a run redone since is
not read from an older segment); every other run is read from its own trace. So a segment
missing (its driver killed before writing it, a sweep stored before segments existed) or
damaged costs a reader time, never a wrong number, and segments change nothing of the store's
exactly-once: a run is stored and logged once, a segment only repeats its trace.

The store writes one every ``SEGMENT_RUNS`` runs it stores and one for the rest when the sweep
ends (``Store.write_result``, ``Store.flush_segment``), from the traces in memory, atomically
and under the name of its own content. Readers (``optfarm.farm.sweep.results.load_sweep``) never
write them: runs stored before segments existed, or by a driver killed before its next segment, are
read from their own files.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = ["FOLDER", "SEGMENT_RUNS", "pack", "unpack"]

FOLDER = "traces"
SEGMENT_RUNS = 1000
_RUNS = b"optfarm.runs"  # the segment's runs: {run_key: trace sha256}, in its Parquet metadata


def pack(runs: Sequence[tuple[str, str, pa.Table]]) -> tuple[str, bytes]:
    """One segment of ``runs`` (run_key, the trace's sha256 as its record holds it, the
    trace): its name (the sha256 of its bytes) and its bytes."""
    table = pa.concat_tables([trace for _, _, trace in runs], promote_options="default")
    listed = json.dumps({key: sha for key, sha, _ in runs}, separators=(",", ":"))
    table = table.replace_schema_metadata({_RUNS: listed.encode()})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    data = sink.getvalue().to_pybytes()
    return hashlib.sha256(data).hexdigest(), data


def unpack(
    name: str, data: bytes, wanted: Mapping[str, str], columns: Sequence[str] | None = None
) -> tuple[pa.Table | None, set[str]]:
    """The rows of the runs of ``wanted`` (run_key -> the trace sha256 its record holds) that
    the segment ``name`` (its bytes ``data``) holds with that checksum, with ``columns`` of
    them (and ``run_key``), and those runs; (None, no run) for a segment whose bytes do not
    hash to its name or do not read."""
    if hashlib.sha256(data).hexdigest() != name:
        return None, set()
    try:
        file = pq.ParquetFile(pa.BufferReader(data))
        listed = json.loads(file.schema_arrow.metadata[_RUNS])
    except (pa.ArrowInvalid, KeyError, TypeError, ValueError):
        return None, set()
    keys = {key for key, sha in listed.items() if wanted.get(key) == sha}
    if not keys:
        return None, set()
    names = file.schema_arrow.names
    read = None if columns is None else [c for c in names if c in columns or c == "run_key"]
    table = file.read(columns=read, use_threads=False).replace_schema_metadata(None)
    if len(keys) < len(listed):
        table = table.filter(pc.is_in(table.column("run_key"), pa.array(sorted(keys))))
    return table, keys
