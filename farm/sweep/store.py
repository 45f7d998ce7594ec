"""The results store of a sweep: the source of truth for what ran.

Layout of the output folder::

    sweep.json                  the validated sweep spec (what ``farm sync`` and reports read),
                                with the sweep's id (``sweep_id``: it names the sweep in MLflow)
    lock                        who runs the sweep now (pid, host); ``flock``-ed while they do
    runs/<run_key>.parquet      the trace of a finished run (``farm.run.loop.TRACE_SCHEMA``)
    runs/<run_key>.json         the run's record: spec, status (done|failed), summary or error,
                                attempts, node, wall and CPU time of the run, the trace's
                                sha256 and size, and the record's own sha256
    verified.json               the signature of each record and trace when last written or hashed
                                (``VerifiedFiles``: a resume hashes only the files changed since)
    quarantine/                 damaged records and traces, moved aside (their runs are redone)
    index.parquet               one row per record (rebuilt from the records; for users)
    mlflow.db                   default MLflow tracking store (see ``farm.sweep.tracking``)
    mlflow_runs.jsonl           cache of the MLflow runs logged (append-only; never the truth)

Every file is written atomically (a temporary name in the same folder, then ``os.replace``),
and a record is written only after its trace, so a crash leaves either a finished run or no
trace of it. A run counts as finished when its record says ``done`` and both the record and the
trace match their checksums (``scan``); a rerun quarantines what does not match and runs it
again. One driver at a time: ``FolderLock`` holds an exclusive lock on the folder.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from farm.run.loop import RunResult
from farm.run.metrics import final_quality
from farm.run.spec import RunSpec

__all__ = ["DamagedFile", "FolderBusy", "FolderLock", "Scan", "Store", "StoreError",
           "VerifiedFiles", "atomic_write_bytes", "atomic_write_json", "fault_point",
           "read_json", "signature"]
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


class StoreError(OSError):
    """A file of the store cannot be written or read (disk full, read-only folder, ...); the
    message is one line naming the path."""

    def __init__(self, code: int | None, message: str):
        super().__init__(message)
        self.errno = code


class DamagedFile(ValueError):
    """A stored file does not match what was written (truncated, bit-flipped, missing); the
    message is one line naming the file."""

    def __init__(self, path: Path, why: str, run_key: str | None = None):
        super().__init__(f"{path}: {why}")
        self.path, self.why, self.run_key = path, why, run_key


class FolderBusy(RuntimeError):
    """Another driver holds the output folder's lock; the message names it."""


_FAULT_COUNTS: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Where the fault-injection tests (``tests/farm/test_faults.py``) kill the driver:
    SIGKILL this process when ``$FARM_FAULT`` is ``name`` (or ``name:N``, at its N-th pass)."""
    want = os.environ.get("FARM_FAULT")
    if not want or not want.startswith(name):
        return
    _FAULT_COUNTS[name] = _FAULT_COUNTS.get(name, 0) + 1
    if want in (name, f"{name}:{_FAULT_COUNTS[name]}"):
        os.kill(os.getpid(), signal.SIGKILL)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and not isinstance(e, StoreError):
            raise StoreError(e.errno, f"cannot write {path}: {e.strerror or e}") from None
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, json.dumps(obj, indent=1, sort_keys=True, default=_jsonable).encode())


def read_json(path: Path) -> Any:
    """The JSON in ``path``; a file that is not valid JSON raises DamagedFile, an OS error
    StoreError, each naming the path."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise StoreError(e.errno, f"cannot read {path}: {e.strerror or e}") from None
    return _parse_json(path, data)


def _parse_json(path: str | Path, data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        how = "empty" if not data else f"not valid JSON, truncated? ({e})"
        raise DamagedFile(Path(path), how) from None


def _canonical(record: dict) -> bytes:
    body = {k: v for k, v in record.items() if k != "sha256"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), default=_jsonable).encode()


def _sealed(record: dict) -> dict:
    """The record with its own checksum (sha256 of its canonical JSON, the checksum left out)."""
    return {**record, "sha256": hashlib.sha256(_canonical(record)).hexdigest()}


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


@dataclass
class Scan:
    """The records of a store, each read and verified once: ``records`` (run_key -> record)
    those intact, ``damaged`` one DamagedFile per run whose record or trace does not match."""

    records: dict[str, dict] = field(default_factory=dict)
    damaged: list[DamagedFile] = field(default_factory=list)

    def finished(self) -> set[str]:
        return {k for k, r in self.records.items() if r["status"] == "done"}


def signature(st: os.stat_result) -> list[int]:
    """What changes whenever a file is changed through the file system: its size, modification
    and change times and inode (the change time cannot be set back by a user)."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


class VerifiedFiles:
    """``verified.json``: the ``signature`` each record and trace had when the store wrote it
    or last hashed it, so that a resume hashes only the files changed since (reading 20,000
    records is needed anyway; hashing them and their traces again is not).

    The guarantee kept: any change made to a record or trace through the file system after it
    was written or verified (a byte overwritten, a truncation, a replacement, the folder
    copied or moved to another file system, its modification time set back: the change time
    moves anyway) changes its signature, so the file is hashed and, if damaged, quarantined
    and its run redone. What a resume does not see: damage below the file system that leaves
    the inode as it was (a disk's bit rot, unflushed data lost in a power cut after the
    signature was kept); ``farm sweep --verify`` hashes every file, and ``farm report`` and
    ``farm sync`` always do. A damaged or foreign ``verified.json`` is ignored (everything is
    hashed)."""

    NAME = "verified.json"

    def __init__(self):
        self.files: dict[str, list] = {}   # run_key -> [record signature, trace signature]
        self._saved: dict[str, list] | None = None

    def load(self, root: Path) -> dict[str, list]:
        try:
            data = json.loads((root / self.NAME).read_bytes())
            files = data["files"] if data.get("version") == 1 else {}
            self._saved = {k: v for k, v in files.items()
                           if isinstance(v, list) and len(v) == 2}
        except (OSError, ValueError, TypeError, AttributeError, KeyError):
            self._saved = {}
        return self._saved

    def add(self, key: str, record_sig: list[int], trace_sig: list[int] | None) -> None:
        self.files[key] = [record_sig, trace_sig]

    def drop(self, key: str) -> None:
        self.files.pop(key, None)

    def save(self, root: Path) -> None:
        """Write what this store wrote or verified (if it differs from what was loaded)."""
        if self.files != self._saved:
            atomic_write_bytes(root / self.NAME, json.dumps(
                {"version": 1, "files": self.files}, separators=(",", ":")).encode())
            self._saved = dict(self.files)


class Store:
    """Read and write a sweep's output folder (see the module docstring)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.runs = self.root / "runs"
        self.verified_files = VerifiedFiles()

    def trace_path(self, run_key: str) -> Path:
        return self.runs / f"{run_key}.parquet"

    def record_path(self, run_key: str) -> Path:
        return self.runs / f"{run_key}.json"

    # -- writing -----------------------------------------------------------------------------
    def write_spec(self, spec_dict: dict[str, Any], sweep_id: str) -> None:
        atomic_write_json(self.root / "sweep.json", {**spec_dict, "sweep_id": sweep_id})

    def write_result(self, spec: RunSpec, result: RunResult, *, attempts: int = 1,
                     duration_s: float = math.nan, cpu_s: float = math.nan,
                     where: dict | None = None) -> dict:
        """Store a finished run: its trace, then its record with the trace's checksum (that
        order: see the module doc)."""
        sink = pa.BufferOutputStream()
        pq.write_table(result.trace, sink)
        data = sink.getvalue().to_pybytes()
        key = spec.run_key
        atomic_write_bytes(self.trace_path(key), data)
        fault_point("after-trace")
        record = self._record(spec, key, "done", attempts, duration_s, where)
        record["summary"] = result.summary
        record["cpu_s"] = cpu_s
        record["trace_sha256"] = hashlib.sha256(data).hexdigest()
        record["trace_bytes"] = len(data)
        record = _sealed(record)
        atomic_write_json(self.record_path(key), record)
        fault_point("after-record")
        self.verified_files.add(key, signature(self.record_path(key).stat()),
                                signature(self.trace_path(key).stat()))
        return record

    def write_failure(self, spec: RunSpec, error: str, *, attempts: int = 1,
                      duration_s: float = math.nan, where: dict | None = None) -> dict:
        """Record a failed run (it is retried the next time the sweep runs)."""
        key = spec.run_key
        record = self._record(spec, key, "failed", attempts, duration_s, where)
        record["error"] = error
        record = _sealed(record)
        atomic_write_json(self.record_path(key), record)
        self.verified_files.add(key, signature(self.record_path(key).stat()), None)
        return record

    @staticmethod
    def _record(spec, key, status, attempts, duration_s, where) -> dict:
        return {"run_key": key, "spec": spec_to_dict(spec), "status": status,
                "attempts": attempts, "duration_s": duration_s, "where": where or {},
                "finished_at": time.time()}

    def quarantine(self, damage: DamagedFile) -> Path:
        """Move a damaged run's record and trace aside (into ``quarantine/``), so that its run
        is redone; returns the quarantine folder."""
        folder = self.root / "quarantine"
        self.verified_files.drop(damage.run_key)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for path in (self.record_path(damage.run_key), self.trace_path(damage.run_key)):
            if path.exists():
                folder.mkdir(exist_ok=True)
                try:
                    os.replace(path, folder / f"{path.name}.{stamp}")
                except OSError as e:
                    raise StoreError(e.errno, f"cannot move {path} to {folder}: "
                                     f"{e.strerror or e}") from None
        return folder

    # -- reading -----------------------------------------------------------------------------
    def scan(self, *, trust_unchanged: bool = False) -> Scan:
        """Every record, read once and checked against its checksum, and each done run's trace
        against the size and checksum in its record. With ``trust_unchanged``, a file whose
        signature (size, modification and change times, inode) is the one it had when this
        store last wrote or verified it (``verified.json``) is not hashed again: see
        ``VerifiedFiles`` for what that still detects."""
        scan = Scan()
        if not self.runs.is_dir():
            return scan
        known = self.verified_files.load(self.root) if trust_unchanged else {}
        folder = str(self.runs)  # plain strings: 20,000 pathlib paths cost a second
        for name in sorted(n for n in os.listdir(folder) if n.endswith(".json")):
            key = name[:-len(".json")]
            try:
                record, record_sig = self._read_record(os.path.join(folder, name), key)
                trusted = known.get(key) or (None, None)
                if trusted[0] != record_sig:
                    self._check_record_sha(record, key)
                trace_sig = None
                if record["status"] == "done":
                    trace_sig = self._verify_trace(record, trusted[1])
            except DamagedFile as e:
                e.run_key = e.run_key or key
                scan.damaged.append(e)
                continue
            self.verified_files.add(key, record_sig, trace_sig)
            scan.records[key] = record
        return scan

    def _read_record(self, path: str, key: str) -> tuple[dict, list[int]]:
        """The record of ``key`` in ``path`` and the signature of the file it was read from."""
        try:
            with open(path, "rb") as f:
                sig = signature(os.fstat(f.fileno()))
                data = f.read()
        except OSError as e:
            raise StoreError(e.errno, f"cannot read {path}: {e.strerror or e}") from None
        record = _parse_json(path, data)
        if not isinstance(record, dict) or record.get("run_key") != key:
            raise DamagedFile(Path(path), "not a run record of this store", key)
        return record, sig

    def _check_record_sha(self, record: dict, key: str) -> None:
        want = record.get("sha256")  # records written before checksums have none
        if want is not None and hashlib.sha256(_canonical(record)).hexdigest() != want:
            raise DamagedFile(self.record_path(key), "content does not match its sha256", key)

    def _verified_record(self, key: str) -> dict:
        record, _ = self._read_record(str(self.record_path(key)), key)
        self._check_record_sha(record, key)
        return record

    def _verify_trace(self, record: dict, trusted: list[int] | None = None) -> list[int] | None:
        """Check a done run's trace; returns its signature (None: written before checksums).
        Its bytes are hashed unless its signature is ``trusted``."""
        key = record["run_key"]
        path = f"{self.runs}/{key}.parquet"
        try:
            sig = signature(os.stat(path))
        except FileNotFoundError:
            raise DamagedFile(Path(path), "trace missing", key) from None
        want = record.get("trace_sha256")
        if want is None:
            return None
        size = sig[0]
        if size != record["trace_bytes"]:
            raise DamagedFile(Path(path), f"trace truncated or extended ({size} bytes, "
                              f"{record['trace_bytes']} written)", key)
        if sig != trusted and hashlib.sha256(Path(path).read_bytes()).hexdigest() != want:
            raise DamagedFile(Path(path), "trace content does not match its sha256", key)
        return sig

    def verified(self, *, trust_unchanged: bool = False) -> Scan:
        """``scan``, refusing any damaged file (for readers: ``farm report``, ``farm sync``);
        ``trust_unchanged`` as ``scan``'s."""
        scan = self.scan(trust_unchanged=trust_unchanged)
        if scan.damaged:
            first = scan.damaged[0]
            more = f" (and {len(scan.damaged) - 1} more)" if len(scan.damaged) > 1 else ""
            raise DamagedFile(first.path, f"{first.why}{more}; run the sweep again to redo "
                              "damaged runs", first.run_key)
        return scan

    def records(self) -> Iterable[dict]:
        return self.verified().records.values()

    def record(self, run_key: str) -> dict | None:
        path = self.record_path(run_key)
        return self._verified_record(run_key) if path.exists() else None

    def finished(self) -> set[str]:
        """run_keys whose record says done and whose record and trace are intact."""
        return self.verified().finished()

    def trace(self, run_key: str, columns: Iterable[str] | None = None) -> pa.Table:
        """The run's trace; with ``columns``, only those of them the trace has (a trace
        written before a column was added lacks it). One file, no dataset discovery: a
        report reads 20,000 of them."""
        path = self.trace_path(run_key)
        try:
            file = pq.ParquetFile(path)
            if columns is None:
                return file.read()
            names = set(file.schema_arrow.names)
            return file.read(columns=[c for c in columns if c in names])
        except OSError as e:
            raise StoreError(getattr(e, "errno", None), f"cannot read {path}: {e}") from None
        except pa.ArrowInvalid as e:
            raise DamagedFile(path, f"not a readable Parquet file ({e})", run_key) from None

    def read_sweep(self) -> dict[str, Any] | None:
        """``sweep.json`` as written (spec and sweep id); None when there is none."""
        path = self.root / "sweep.json"
        if not path.exists():
            return None
        data = read_json(path)
        if not isinstance(data, dict):
            raise DamagedFile(path, "not a sweep spec")
        return data

    def read_spec(self) -> dict[str, Any] | None:
        data = self.read_sweep()
        return None if data is None else {k: v for k, v in data.items() if k != "sweep_id"}

    # -- the index -----------------------------------------------------------------------------
    def write_index(self, records: Iterable[dict] | None = None) -> pa.Table:
        """Rebuild ``index.parquet`` from the records (atomically) and return it."""
        records = list(self.records() if records is None else records)
        rows = [_index_row(r) for r in sorted(records, key=lambda r: r["run_key"])]
        table = pa.Table.from_pylist(rows, schema=INDEX_SCHEMA)
        digest = _records_digest(records)
        if digest is not None:
            table = table.replace_schema_metadata({INDEX_DIGEST: digest})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        atomic_write_bytes(self.root / "index.parquet", sink.getvalue().to_pybytes())
        return table

    def refresh_index(self, records: Iterable[dict]) -> None:
        """``write_index`` unless ``index.parquet`` was built from exactly these records (the
        digest of their checksums kept in its metadata): a resume that ran nothing rewrites
        nothing."""
        records = list(records)
        digest = _records_digest(records)
        try:
            metadata = pq.read_schema(self.root / "index.parquet").metadata or {}
        except (OSError, pa.ArrowInvalid):  # missing or damaged: rebuilt
            metadata = {}
        if digest is None or metadata.get(INDEX_DIGEST) != digest.encode():
            self.write_index(records)


INDEX_DIGEST = b"optfarm.records_sha256"


def _records_digest(records: list[dict]) -> str | None:
    """A digest of the records' own checksums (None if one has none: written before them)."""
    sums = sorted(r.get("sha256") or "" for r in records)
    if not all(sums):
        return None
    return hashlib.sha256("".join(sums).encode()).hexdigest()


class FolderLock:
    """An exclusive lock on a sweep's output folder for the life of a driver: ``flock`` on
    ``OUT/lock`` (released by the kernel on any exit, SIGKILL included) with the holder's pid,
    host and command written in it. Where ``flock`` is not supported (some network file
    systems) the recorded pid is checked instead: a holder on this host that is gone is a
    stale lock and is taken over."""

    def __init__(self, root: str | Path):
        self.path = Path(root) / "lock"
        self._fd: int | None = None

    def __enter__(self) -> "FolderLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            if e.errno in (errno.EROFS, errno.EACCES) and self.path.parent.is_dir():
                return  # a read-only folder: no driver can write it (farm sync still reads it)
            raise StoreError(e.errno, f"cannot open {self.path}: {e.strerror or e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._holder(fd)
            os.close(fd)
            raise FolderBusy(f"{self.path.parent} is in use by another sweep "
                             f"({_describe(holder)}); wait for it to end or stop it") from None
        except OSError as e:
            if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                os.close(fd)
                raise StoreError(e.errno, f"cannot lock {self.path}: {e.strerror}") from None
            holder = self._holder(fd)
            if holder and _alive(holder):
                os.close(fd)
                raise FolderBusy(f"{self.path.parent} is in use by another sweep "
                                 f"({_describe(holder)}); wait for it to end or stop it, or "
                                 f"remove {self.path} if it no longer runs") from None
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(),
              "command": " ".join(sys.argv)[:500]}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        self._fd = fd

    @staticmethod
    def _holder(fd: int) -> dict | None:
        try:
            holder = json.loads(os.pread(fd, 4096, 0) or b"null")
            return holder if isinstance(holder, dict) else None
        except ValueError:
            return None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # the flock goes with the descriptor
            self._fd = None


def _alive(holder: dict) -> bool:
    """Whether the holder may still run: not provably dead (a pid gone on this host)."""
    if holder.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(holder.get("pid", -1)), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError):
        return True
    return True


def _describe(holder: dict | None) -> str:
    if not holder:
        return "holder unknown"
    since = time.strftime("%H:%M:%S", time.localtime(holder.get("since", 0)))
    state = "" if _alive(holder) else ", gone: the lock is held by a process it started"
    return f"pid {holder.get('pid')} on {holder.get('host')} since {since}{state}: " \
           f"{holder.get('command', '?')}"


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
