"""The results store of a sweep: the source of truth for what ran.

Layout of the output folder::

    sweep.json                  the validated sweep spec (what ``farm sync`` and reports read)
    runs/<run_key>.parquet      the trace of a finished run (``farm.run.loop.TRACE_SCHEMA``)
    runs/<run_key>.json         the run's record: spec, status (done|failed), summary or error,
                                attempts, node, wall and CPU time of the run
    index.parquet               one row per record (rebuilt from the records; for users)
    mlflow.db                   default MLflow tracking store (see ``farm.sweep.tracking``)
    mlflow_runs.json            run map: tracking URI -> sweep parent run, run_key -> run id

Every file is written atomically (a temporary name in the same folder, then ``os.replace``),
and a record is written only after its trace, so a crash leaves either a finished run or no
trace of it. A run counts as finished when its record says ``done``; re-running a sweep skips
those and re-runs failed ones.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from farm.run.loop import RunResult
from farm.run.metrics import final_quality
from farm.run.spec import RunSpec

__all__ = ["Store", "atomic_write_bytes", "atomic_write_json"]

INDEX_SCHEMA = pa.schema([
    ("run_key", pa.string()), ("dataset", pa.string()), ("optimizer", pa.string()),
    ("params", pa.string()), ("seed", pa.int64()), ("status", pa.string()),
    ("error", pa.string()), ("attempts", pa.int64()), ("metric", pa.string()),
    ("final_metric", pa.float64()), ("final_feasible", pa.bool_()),
    ("n_evaluations", pa.int64()), ("exploration_cost", pa.float64()),
    ("stop_reason", pa.string()), ("median_latency_s", pa.float64()),
    ("duration_s", pa.float64()), ("cpu_s", pa.float64()), ("node_id", pa.string()),
    ("pid", pa.int64()),
    ("finished_at", pa.float64()),
])


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, json.dumps(obj, indent=1, sort_keys=True, default=_jsonable).encode())


def _jsonable(o):
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {o!r}")


def spec_to_dict(spec: RunSpec) -> dict[str, Any]:
    d = asdict(spec)
    d["constraints"] = None if spec.constraints is None else list(spec.constraints)
    d["budget"] = None if spec.budget is None or math.isinf(spec.budget) else spec.budget
    return d


def spec_from_dict(d: dict[str, Any]) -> RunSpec:
    d = dict(d)
    if d.get("constraints") is not None:
        d["constraints"] = tuple(d["constraints"])
    return RunSpec(**d)


class Store:
    """Read and write a sweep's output folder (see the module docstring)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.runs = self.root / "runs"

    def trace_path(self, run_key: str) -> Path:
        return self.runs / f"{run_key}.parquet"

    def record_path(self, run_key: str) -> Path:
        return self.runs / f"{run_key}.json"

    # -- writing -----------------------------------------------------------------------------
    def write_spec(self, spec_dict: dict[str, Any]) -> None:
        atomic_write_json(self.root / "sweep.json", spec_dict)

    def write_result(self, spec: RunSpec, result: RunResult, *, attempts: int = 1,
                     duration_s: float = math.nan, cpu_s: float = math.nan,
                     where: dict | None = None) -> dict:
        """Store a finished run: its trace, then its record (that order: see the module doc)."""
        sink = pa.BufferOutputStream()
        pq.write_table(result.trace, sink)
        atomic_write_bytes(self.trace_path(spec.run_key), sink.getvalue().to_pybytes())
        record = self._record(spec, "done", attempts, duration_s, where)
        record["summary"] = result.summary
        record["cpu_s"] = cpu_s
        atomic_write_json(self.record_path(spec.run_key), record)
        return record

    def write_failure(self, spec: RunSpec, error: str, *, attempts: int = 1,
                      duration_s: float = math.nan, where: dict | None = None) -> dict:
        """Record a failed run (it is retried the next time the sweep runs)."""
        record = self._record(spec, "failed", attempts, duration_s, where)
        record["error"] = error
        atomic_write_json(self.record_path(spec.run_key), record)
        return record

    @staticmethod
    def _record(spec, status, attempts, duration_s, where) -> dict:
        return {"run_key": spec.run_key, "spec": spec_to_dict(spec), "status": status,
                "attempts": attempts, "duration_s": duration_s, "where": where or {},
                "finished_at": time.time()}

    # -- reading -----------------------------------------------------------------------------
    def records(self) -> Iterator[dict]:
        if not self.runs.is_dir():
            return
        for path in sorted(self.runs.glob("*.json")):
            yield json.loads(path.read_text())

    def record(self, run_key: str) -> dict | None:
        path = self.record_path(run_key)
        return json.loads(path.read_text()) if path.exists() else None

    def finished(self) -> set[str]:
        """run_keys whose record says done (and whose trace is there)."""
        return {r["run_key"] for r in self.records()
                if r["status"] == "done" and self.trace_path(r["run_key"]).exists()}

    def trace(self, run_key: str) -> pa.Table:
        return pq.read_table(self.trace_path(run_key))

    def read_spec(self) -> dict[str, Any] | None:
        path = self.root / "sweep.json"
        return json.loads(path.read_text()) if path.exists() else None

    # -- the index -----------------------------------------------------------------------------
    def write_index(self) -> pa.Table:
        """Rebuild ``index.parquet`` from the records (atomically) and return it."""
        rows = [_index_row(r) for r in self.records()]
        table = pa.Table.from_pylist(rows, schema=INDEX_SCHEMA)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        atomic_write_bytes(self.root / "index.parquet", sink.getvalue().to_pybytes())
        return table


def _index_row(r: dict) -> dict:
    spec, s = r["spec"], r.get("summary") or {}
    rec, metric = s.get("recommendation"), s.get("metric")
    final = final_quality(s) if s else None
    return {
        "run_key": r["run_key"], "dataset": spec["dataset"], "optimizer": spec["optimizer"],
        "params": json.dumps(spec["params"], sort_keys=True), "seed": spec["seed"],
        "status": r["status"], "error": r.get("error"), "attempts": r["attempts"],
        "metric": metric, "final_metric": final,
        "final_feasible": bool(rec and rec["feasible"]) if s else None,
        "n_evaluations": s.get("n_evaluations"), "exploration_cost": s.get("exploration_cost"),
        "stop_reason": s.get("stop_reason"),
        "median_latency_s": (s.get("recommendation_latency_s") or {}).get("median"),
        "duration_s": r.get("duration_s"), "cpu_s": r.get("cpu_s"),
        "node_id": r["where"].get("node_id"),
        "pid": r["where"].get("pid"), "finished_at": r["finished_at"],
    }
