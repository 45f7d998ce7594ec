"""MLflow tracking of sweeps: every MLflow call of optfarm is in this module.

Layout (DESIGN.md, "farm/ -> MLflow"): one parent run per sweep and one nested run per run key
(dataset, optimizer, parameters, seed), tagged ``mlflow.parentRunId`` and ``optfarm.run_key``,
with the resolved run spec as parameters (optimizer parameters as ``opt.<name>``), per-step
metrics (``incumbent_cno`` or ``incumbent_accuracy_c``, ``exploration_cost``,
``recommendation_latency_s``; step = evaluation index), summary metrics and the trace Parquet
as an artifact. Runs end FINISHED, or FAILED with the error as a tag.

The tracking URI is, in order: the one given, ``$MLFLOW_TRACKING_URI``, else
``sqlite:///<out>/mlflow.db``. A run map in the output folder (``mlflow_runs.json``: tracking
URI -> parent run and run_key -> run id) makes logging idempotent, as the MLflow callback of
Ray Tune does with its trial -> run map: a run already logged is never logged again (a failed
one that later succeeds is completed in the same MLflow run). If the server is unreachable the
tracker warns once and goes quiet; the results are in the store and ``farm sync DIR`` replays
them later.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from farm.sweep.store import Store, atomic_write_json

__all__ = ["Tracker", "resolve_uri", "sweep_uri", "sync"]

# an unreachable server should cost seconds, not MLflow's default minutes of retries
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
# no "View run at" lines (two per run, and a round trip each) under the progress bar
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
# MLflow's own start-up lines (creating and migrating the sqlite store) are not the sweep's news
for _logger in ("mlflow.store.db.utils", "alembic"):
    logging.getLogger(_logger).setLevel(logging.WARNING)

STEP_METRICS = ("cum_exploration_cost", "recommendation_latency_s")
_BATCH = 1000  # MLflow's limit of metrics per log_batch call


def resolve_uri(out: str | Path, uri: str | None = None) -> str:
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or \
        f"sqlite:///{Path(out).resolve() / 'mlflow.db'}"


def sweep_uri(out: str | Path, uri: str | None = None) -> str:
    """The tracking URI of the sweep stored in ``out``: the one given, else its spec's, else
    ``resolve_uri``'s default."""
    spec = Store(out).read_spec() or {}
    return resolve_uri(out, uri or (spec.get("tracking") or {}).get("uri"))


def _metric_name(label: str) -> str:
    """``cno<=2`` -> ``cno_le_2`` (MLflow names allow letters, digits, ``_-./`` and spaces)."""
    label = label.replace("<=", "_le_").replace(">=", "_ge_")
    return re.sub(r"[^A-Za-z0-9_\-./ ]", "_", label)


class Tracker:
    """Logs a sweep's stored runs to one tracking URI (see the module docstring)."""

    def __init__(self, out: str | Path, uri: str | None = None, experiment: str | None = None,
                 sweep_name: str | None = None):
        self.store = Store(out)
        self.uri = resolve_uri(out, uri)
        self.sweep_name = sweep_name or Path(out).resolve().name
        self.experiment = experiment or self.sweep_name
        self.offline = False
        self._map_path = self.store.root / "mlflow_runs.json"
        maps = json.loads(self._map_path.read_text()) if self._map_path.exists() else {}
        self._maps = maps
        self._map = maps.setdefault(self.uri, {"parent": None, "runs": {}})
        self._client = None
        self._experiment_id = None

    # -- connection ----------------------------------------------------------------------------
    def _warn(self, what: str, e: BaseException | str) -> None:
        if not self.offline:
            print(f"farm: warning: MLflow tracking at {self.uri} unavailable ({what}: "
                  f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__});"
                  f" results are stored, upload them later with `farm sync "
                  f"{self.store.root}`", file=sys.stderr)
        self.offline = True

    def _connect(self) -> bool:
        if self.offline:
            return False
        if self._client is not None:
            return True
        if self.uri.startswith(("http://", "https://")):
            try:
                urllib.request.urlopen(self.uri.rstrip("/") + "/health", timeout=3).read()
            except OSError as e:
                self._warn("no answer", e)
                return False
        try:
            from mlflow.tracking import MlflowClient

            client = MlflowClient(tracking_uri=self.uri)
            exp = client.get_experiment_by_name(self.experiment)
            if exp is None:
                location = None
                if not self.uri.startswith(("http://", "https://", "databricks")):
                    location = (self.store.root.resolve() / "mlartifacts").as_uri()
                self._experiment_id = client.create_experiment(self.experiment, location)
            else:
                self._experiment_id = exp.experiment_id
        except Exception as e:  # any failure of the tracking backend
            self._warn("connect", e)
            return False
        self._client = client
        return True

    def _save_map(self) -> None:
        atomic_write_json(self._map_path, self._maps)

    # -- the sweep's parent run ------------------------------------------------------------------
    def start_sweep(self, params: dict[str, Any] | None = None) -> str | None:
        """The sweep's parent run (the same one when the sweep is resumed)."""
        if not self._connect():
            return None
        try:
            if self._map["parent"] is None:
                run = self._client.create_run(
                    self._experiment_id, run_name=self.sweep_name,
                    tags={"optfarm.sweep": self.sweep_name,
                          "optfarm.out": str(self.store.root.resolve())})
                self._map["parent"] = run.info.run_id
                self._save_map()
                self._log_params(self._map["parent"], params or {})
                spec = self.store.root / "sweep.json"
                if spec.exists():
                    self._client.log_artifact(self._map["parent"], str(spec))
            else:
                self._client.update_run(self._map["parent"], status="RUNNING")
        except Exception as e:
            self._warn("start sweep", e)
            return None
        return self._map["parent"]

    def end_sweep(self, failed: bool = False) -> None:
        if self.offline or self._map["parent"] is None or not self._connect():
            return
        try:
            self._client.set_terminated(self._map["parent"], "FAILED" if failed else "FINISHED")
        except Exception as e:
            self._warn("end sweep", e)

    def log_sweep_artifacts(self, files: list[Path], artifact_path: str) -> bool:
        """Attach ``files`` (e.g. ``farm report``'s) to the sweep's parent run, under
        ``artifact_path``; False when the sweep has no parent run here or tracking fails."""
        if self._map["parent"] is None or not self._connect():
            return False
        try:
            for f in files:
                self._client.log_artifact(self._map["parent"], str(f), artifact_path)
        except Exception as e:
            self._warn("log artifacts", e)
            return False
        return True

    # -- one run ---------------------------------------------------------------------------------
    def logged(self, record: dict) -> bool:
        """Whether the stored run is in MLflow in the state its record says (FINISHED for a
        done run, FAILED for a failed one)."""
        want = "FINISHED" if record["status"] == "done" else "FAILED"
        return self._map["runs"].get(record["run_key"], {}).get("status") == want

    def log_record(self, record: dict) -> bool:
        """Log one stored run (a record of ``farm.sweep.store``) as a nested run; False when offline.
        A run already logged in that state is skipped."""
        key = record["run_key"]
        if self.logged(record):
            return True
        if self.start_sweep() is None:
            return False
        try:
            entry = self._map["runs"].get(key)
            if entry is not None and entry["status"] == "RUNNING":
                # logging was cut off half-way (server gone): start that run afresh
                self._client.delete_run(entry["run_id"])
                entry = None
            if entry is None:
                entry = {"run_id": self._create_run(record), "status": "RUNNING"}
                self._map["runs"][key] = entry
                self._save_map()
            run_id = entry["run_id"]
            if record["status"] == "done":
                self._log_done(run_id, record)
                self._client.set_terminated(run_id, "FINISHED")
                entry["status"] = "FINISHED"
            else:
                self._client.set_tag(run_id, "optfarm.error", str(record.get("error"))[:5000])
                self._client.set_terminated(run_id, "FAILED")
                entry["status"] = "FAILED"
            self._save_map()
        except Exception as e:
            self._warn(f"log run {key}", e)
            return False
        return True

    def _create_run(self, record: dict) -> str:
        spec = record["spec"]
        run = self._client.create_run(
            self._experiment_id,
            run_name=f"{spec['optimizer']} {spec['dataset']} seed {spec['seed']}",
            tags={"mlflow.parentRunId": self._map["parent"], "optfarm.run_key": record["run_key"],
                  "optfarm.sweep": self.sweep_name,
                  "optfarm.node_id": str(record["where"].get("node_id"))})
        params = {k: v for k, v in spec.items() if k != "params"}
        params.update({f"opt.{k}": v for k, v in spec["params"].items()})
        params["run_key"] = record["run_key"]
        self._log_params(run.info.run_id, params)
        return run.info.run_id

    def _log_params(self, run_id: str, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, json.dumps(v) if isinstance(v, (list, dict, tuple)) else str(v))
                 for k, v in sorted(params.items())]
        for i in range(0, len(items), 100):
            self._client.log_batch(run_id, params=items[i:i + 100])

    def _log_done(self, run_id: str, record: dict) -> None:
        from mlflow.entities import Metric

        summary = record["summary"]
        metric = summary["metric"]
        trace = self.store.trace(record["run_key"])
        now = int(time.time() * 1000)
        columns = {f"incumbent_{metric}": f"incumbent_{metric}",
                   "cum_exploration_cost": "exploration_cost",
                   "recommendation_latency_s": "recommendation_latency_s"}
        metrics = []
        for column, name in columns.items():
            for step, value in enumerate(trace.column(column).to_pylist()):
                if value is not None and math.isfinite(value):
                    metrics.append(Metric(name, float(value), now, step))
        for name, value in _summary_metrics(summary).items():
            metrics.append(Metric(name, value, now, 0))
        for i in range(0, len(metrics), _BATCH):
            self._client.log_batch(run_id, metrics=metrics[i:i + _BATCH])
        self._client.log_artifact(run_id, str(self.store.trace_path(record["run_key"])))


def _summary_metrics(summary: dict) -> dict[str, float]:
    metric, rec = summary["metric"], summary["recommendation"]
    out = {"n_evaluations": float(summary["n_evaluations"]),
           "exploration_cost_total": float(summary["exploration_cost"]),
           "final_feasible": float(bool(rec and rec["feasible"]))}
    if rec is not None and math.isfinite(rec[metric]):
        out[f"final_{metric}"] = float(rec[metric])
    for label, cost in summary["exploration_cost_to_reach"].items():
        if cost is not None:
            out[f"cost_to_{_metric_name(label)}"] = float(cost)
    for stat, value in summary["recommendation_latency_s"].items():
        if value is not None:
            out[f"latency_{stat}_s"] = float(value)
    return out


def sync(out: str | Path, uri: str | None = None, experiment: str | None = None) -> tuple[int, int]:
    """Upload every stored run of the sweep in ``out`` not yet logged to ``uri``. Returns
    (runs uploaded now, runs not uploaded because tracking failed)."""
    store = Store(out)
    spec = store.read_spec() or {}
    tracking = spec.get("tracking") or {}
    tracker = Tracker(out, sweep_uri(out, uri), experiment or tracking.get("experiment"),
                      spec.get("name"))
    records = list(store.records())
    todo = [r for r in records if not tracker.logged(r)]
    if todo and tracker.start_sweep({"runs": len(records)}) is None:
        return 0, len(todo)
    uploaded = sum(1 for r in todo if tracker.log_record(r))
    tracker.end_sweep(failed=any(r["status"] != "done" for r in records))
    return uploaded, len(todo) - uploaded
