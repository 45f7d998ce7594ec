"""The results store of a sweep: the source of truth for what ran.

The output folder (``--out``) is a path on this machine (a local disk or a mounted shared
file system) or a ``pyarrow.fs`` URI (``s3://bucket/path``, ``gs://bucket/path``): every file
of the store is read and written through one ``pyarrow.fs.FileSystem`` (``Location``). Its
layout::

    sweep.json                  the validated sweep spec (what ``farm sync`` and reports read),
                                with the sweep's id (``sweep_id``: it names the sweep in MLflow)
                                and its own sha256 (an edited file is refused)
    lock                        who runs the sweep now (pid, host): ``flock``-ed while they do
                                (``FolderLock``), or a lease renewed while they do on an object
                                store (``optfarm.farm.store.locks``)
    runs/<run_key>.parquet      the trace of a finished run (``optfarm.farm.run.loop.TRACE_SCHEMA``)
    runs/<run_key>.json         the run's record: spec, status (done|failed), summary or error,
                                attempts, node, wall and CPU time of the run, the trace's
                                sha256 and size, and the record's own sha256
    traces/<sha256>.parquet     the traces of up to a thousand done runs again, for readers
                                (``optfarm.farm.store.trace_segments``: copies, never the truth)
    verified.json               the signature of each record and trace when last written or hashed
                                (``VerifiedFiles``: a resume hashes only the files changed since)
    quarantine/                 damaged records and traces, moved aside (their runs are redone)
    index.parquet               one row per record (rebuilt from the records; for users)
    mlflow.db                   default MLflow tracking store (see
    ``optfarm.farm.tracking.tracking``) mlflow_runs.jsonl           cache of the MLflow runs logged
    (append-only; never the truth)

The last two live in ``Location.local_dir``: the folder itself when it is a path, a folder of
this machine's cache for a URI (an object store holds no sqlite database and cannot append).

Every file is written atomically (``write_atomically``): on a file system, under a temporary
name in the same folder, then renamed (``rename`` is atomic there); on an object store, by one
upload, which is atomic per object (the object appears whole when its upload completes, or not
at all), so a crash leaves no partial object and no temporary name. A record is written only
after its trace, so a crash leaves either a finished run or no trace of it. A run counts as
finished when its record says ``done`` and both the record and the trace match their checksums
(``scan``); a rerun quarantines what does not match and runs it again. One driver at a time:
``Store.lock`` (``optfarm.farm.store.locks``).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import math
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePath
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from optfarm.farm.run.checkpoint import Checkpoints, every_s_here
from optfarm.farm.run.loop import RunResult
from optfarm.farm.run.metrics import final_quality
from optfarm.farm.run.spec import RunSpec
from optfarm.farm.store.location import (
    Location,
    LocationError,
    StoreError,
    first_line,
    write_atomically,
)
from optfarm.farm.store.locks import FolderBusy, FolderLock, ObjectLease, lock_for
from optfarm.farm.store.trace_segments import FOLDER, SEGMENT_RUNS, pack, unpack

# the errors a Store raises, whichever module defines them, are importable from here
__all__ = [
    "DamagedFile",
    "FolderBusy",
    "LocationError",
    "Scan",
    "Store",
    "StoreError",
    "VerifiedFiles",
    "atomic_write_json",
    "fault_point",
]
INDEX_SCHEMA = pa.schema(
    [
        ("run_key", pa.string()),
        ("dataset", pa.string()),
        ("optimizer", pa.string()),
        ("params", pa.string()),
        ("seed", pa.int64()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("attempts", pa.int64()),
        ("metric", pa.string()),
        ("final_metric", pa.float64()),
        ("final_feasible", pa.bool_()),
        ("n_evaluations", pa.int64()),
        ("exploration_cost", pa.float64()),
        ("stop_reason", pa.string()),
        ("median_latency_s", pa.float64()),
        ("duration_s", pa.float64()),
        ("cpu_s", pa.float64()),
        ("node_id", pa.string()),
        ("pid", pa.int64()),
        ("finished_at", pa.float64()),
    ]
)


class DamagedFile(ValueError):
    """A stored file does not match what was written (truncated, bit-flipped, missing); the
    message is one line naming the file."""

    def __init__(self, path: str | PurePath, why: str, run_key: str | None = None):
        super().__init__(f"{path}: {why}")
        self.path, self.why, self.run_key = path, why, run_key


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


def atomic_write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON to the file ``path`` of this machine, atomically."""
    write_atomically(
        pafs.LocalFileSystem(),
        Path(path),
        json.dumps(obj, indent=1, sort_keys=True, default=_jsonable).encode(),
    )


def _parse_json(path: str | Path, data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        how = "empty" if not data else f"not valid JSON, truncated? ({e})"
        raise DamagedFile(path, how) from None


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
    # its fields one level deep: ``dataclasses.asdict`` deep-copies, 8x slower (measured), and
    # a resume of 20,000 runs hands every spec to the tracker
    d = {name: getattr(spec, name) for name in _SPEC_FIELDS}
    d["params"] = dict(spec.params)
    d["constraints"] = None if spec.constraints is None else list(spec.constraints)
    d["budget"] = None if spec.budget is None or math.isinf(spec.budget) else spec.budget
    if not spec.deadline:  # stored specs (and their variant keys) stay those before the field
        del d["deadline"]
    if spec.planned_evaluations is None:  # the same, for a field issue 41 added
        del d["planned_evaluations"]
    return d


_SPEC_FIELDS = tuple(f.name for f in fields(RunSpec))


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


def signature(location: Location, info: pafs.FileInfo) -> list[int]:
    """What changes whenever a file is changed through its file system: its size and
    modification time, and on this machine's file system also its change time and inode (the
    change time cannot be set back by a user); on an object store the modification time is the
    server's upload time, which no user can set."""
    if location.local:
        st = os.stat(info.path)
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    return [info.size, info.mtime_ns]


class VerifiedFiles:
    """``verified.json``: the ``signature`` each record and trace had when the store wrote it
    or last hashed it, so that a resume hashes only the files changed since (reading 20,000
    records is needed anyway; hashing them and their traces again is not).

    The guarantee kept: any change made to a record or trace through the file system after it
    was written or verified (a byte overwritten, a truncation, a replacement, the folder
    copied or moved to another file system, its modification time set back: the change time
    moves anyway; on an object store any upload over it) changes its signature, so the file
    is hashed and, if damaged, quarantined and its run redone. What a resume does not see:
    damage below the file system that leaves the inode as it was (a disk's bit rot, unflushed
    data lost in a power cut after the signature was kept), and on an object store an object
    of the same size uploaded over it within the second it was written (its modification
    time has whole seconds); ``farm sweep --verify`` hashes every file, and so does ``farm
    sync`` (``farm report`` trusts unchanged files as a resume does). A damaged or foreign
    ``verified.json`` is ignored (everything is hashed)."""

    NAME = "verified.json"

    def __init__(self, location: Location):
        self.location = location
        self.files: dict[str, list] = {}  # run_key -> [record signature, trace signature]
        self._saved: dict[str, list] | None = None

    def load(self) -> dict[str, list]:
        try:
            with self.location.fs.open_input_stream(str(self.location.root / self.NAME)) as f:
                data = json.loads(f.read())
            files = data["files"] if data.get("version") == 1 else {}
            self._saved = {k: v for k, v in files.items() if isinstance(v, list) and len(v) == 2}
        except (OSError, ValueError, TypeError, AttributeError, KeyError):
            self._saved = {}
        return self._saved

    def add(self, key: str, record_sig: list[int], trace_sig: list[int] | None) -> None:
        self.files[key] = [record_sig, trace_sig]

    def drop(self, key: str) -> None:
        self.files.pop(key, None)

    def save(self) -> None:
        """Write what this store wrote or verified (if it differs from what was loaded)."""
        if self.files != self._saved:
            path = self.location.root / self.NAME
            write_atomically(
                self.location.fs,
                path,
                json.dumps({"version": 1, "files": self.files}, separators=(",", ":")).encode(),
                self.location.show(path),
            )
            self._saved = dict(self.files)


class Store:
    """Read and write a sweep's output folder, a path or a URI (see the module docstring)."""

    def __init__(self, out: str | Path | Location):
        self.location = Location.of(out)
        self.fs = self.location.fs
        self.root = self.location.root
        self.runs = self.root / "runs"
        self.checkpoint_folder = self.root / "checkpoints"  # a local store's (checkpoints())
        self.verified_files = VerifiedFiles(self.location)
        self._lock: FolderLock | None = None
        self._segment: list[tuple[str, str, pa.Table]] = []  # stored since the last segment

    def trace_path(self, run_key: str) -> PurePath:
        return self.runs / f"{run_key}.parquet"

    def record_path(self, run_key: str) -> PurePath:
        return self.runs / f"{run_key}.json"

    def checkpoints(self) -> Checkpoints | None:
        """The runs' checkpoints, in ``OUT/checkpoints`` (``optfarm.farm.run.checkpoint``),
        written as often as ``$OPTFARM_CHECKPOINT_S`` says; a folder of this machine, so None
        for a store elsewhere (an object store), and None when they are ``off``."""
        every_s = every_s_here()
        if not self.location.local or every_s is None:
            return None
        return Checkpoints(str(self.checkpoint_folder), every_s)

    def show(self, path: PurePath) -> str:
        return self.location.show(path)

    @contextlib.contextmanager
    def local_copy(self, path: PurePath):
        """A path on this machine holding the file ``path`` of the store (the file itself when
        the store is a path; else a temporary copy), for libraries that read local files."""
        if self.location.local:
            yield Path(path)
            return
        with tempfile.TemporaryDirectory(prefix="optfarm-") as tmp:
            copy = Path(tmp) / path.name
            copy.write_bytes(self._read(path))
            yield copy

    def lock(self) -> FolderLock | ObjectLease:
        """The exclusive lock of one driver on this store, as a context manager
        (``optfarm.farm.store.locks.lock_for``); every write of this store checks that it is still
        held."""
        self._lock = lock_for(self.location)
        return self._lock

    # -- writing -----------------------------------------------------------------------------
    def _write(self, path: PurePath, data: bytes) -> None:
        if self._lock is not None:
            self._lock.check()
        write_atomically(self.fs, path, data, self.show(path))

    def _write_json(self, path: PurePath, obj: Any) -> None:
        self._write(path, json.dumps(obj, indent=1, sort_keys=True, default=_jsonable).encode())

    def _read(self, path: PurePath | str) -> bytes:
        """The bytes of ``path``; FileNotFoundError if it is missing, StoreError if it cannot
        be read."""
        try:
            with self.fs.open_input_stream(str(path)) as f:
                return f.read()
        except FileNotFoundError:
            raise
        except OSError as e:
            raise StoreError(e.errno, f"cannot read {self.show(path)}: {first_line(e)}") from None

    def _info(self, path: PurePath) -> pafs.FileInfo:
        return self.fs.get_file_info(str(path))

    def write_spec(self, spec_dict: dict[str, Any], sweep_id: str) -> None:
        """``sweep.json``: the spec and the sweep id, sealed with its checksum as a record is
        (``read_sweep`` refuses a file edited since)."""
        self._write_json(self.root / "sweep.json", _sealed({**spec_dict, "sweep_id": sweep_id}))

    def write_result(
        self,
        spec: RunSpec,
        result: RunResult,
        *,
        attempts: int = 1,
        duration_s: float = math.nan,
        cpu_s: float = math.nan,
        where: dict | None = None,
    ) -> dict:
        """Store a finished run: its trace, then its record with the trace's checksum (that
        order: see the module doc)."""
        sink = pa.BufferOutputStream()
        pq.write_table(result.trace, sink)
        data = sink.getvalue().to_pybytes()
        key = spec.run_key
        self._write(self.trace_path(key), data)
        fault_point("after-trace")
        record = self._record(spec, key, "done", attempts, duration_s, where)
        record["summary"] = result.summary
        record["cpu_s"] = cpu_s
        record["trace_sha256"] = hashlib.sha256(data).hexdigest()
        record["trace_bytes"] = len(data)
        record = _sealed(record)
        self._write_json(self.record_path(key), record)
        fault_point("after-record")
        if self.location.local:  # the run is stored: it never resumes
            Checkpoints(str(self.checkpoint_folder)).path(key).unlink(missing_ok=True)
        self.verified_files.add(
            key, self.signature(self.record_path(key)), self.signature(self.trace_path(key))
        )
        self._segment.append((key, record["trace_sha256"], result.trace))
        if len(self._segment) >= SEGMENT_RUNS:
            self.flush_segment()
        return record

    def flush_segment(self) -> None:
        """Write the traces stored since the last segment as one (``trace_segments``)."""
        if self._segment:
            self.write_segment(self._segment)
            self._segment = []

    def write_segment(self, runs: list[tuple[str, str, pa.Table]]) -> None:
        """Write ``runs`` (run_key, trace sha256, trace) as one trace segment."""
        name, data = pack(runs)
        self._write(self.root / FOLDER / f"{name}.parquet", data)

    def read_segments(
        self, wanted: dict[str, str], columns: Iterable[str] | None = None
    ) -> tuple[list[pa.Table], set[str]]:
        """The rows (``columns`` of them, and ``run_key``) that the trace segments hold of
        the runs ``wanted`` (run_key -> the trace sha256 its record holds), each run's from
        one segment, and those runs (``trace_segments.unpack`` says which a segment holds)."""
        listed = self.fs.get_file_info(
            pafs.FileSelector(str(self.root / FOLDER), allow_not_found=True)
        )
        paths = sorted(
            i.path
            for i in listed
            if i.type == pafs.FileType.File and i.base_name.endswith(".parquet")
        )
        columns = None if columns is None else set(columns)
        tables, covered = [], set()
        for path, data in zip(paths, self._read_many(paths)):
            left = {k: sha for k, sha in wanted.items() if k not in covered}
            if data is None or not left:
                continue
            table, keys = unpack(PurePath(path).stem, data, left, columns)
            if table is not None:
                tables.append(table)
                covered |= keys
        return tables, covered

    def write_failure(
        self,
        spec: RunSpec,
        error: str,
        *,
        attempts: int = 1,
        duration_s: float = math.nan,
        where: dict | None = None,
    ) -> dict:
        """Record a failed run (it is retried the next time the sweep runs)."""
        key = spec.run_key
        record = self._record(spec, key, "failed", attempts, duration_s, where)
        record["error"] = error
        record = _sealed(record)
        self._write_json(self.record_path(key), record)
        self.verified_files.add(key, self.signature(self.record_path(key)), None)
        return record

    def signature(self, path: PurePath) -> list[int]:
        return signature(self.location, self._info(path))

    def save_verified(self) -> None:
        """Keep the signatures of the files written or verified (``VerifiedFiles``)."""
        if self._lock is not None:
            self._lock.check()
        self.verified_files.save()

    @staticmethod
    def _record(spec, key, status, attempts, duration_s, where) -> dict:
        return {
            "run_key": key,
            "spec": spec_to_dict(spec),
            "status": status,
            "attempts": attempts,
            "duration_s": duration_s,
            "where": where or {},
            "finished_at": time.time(),
        }

    def quarantine(self, damage: DamagedFile) -> str:
        """Move a damaged run's record and trace aside (into ``quarantine/``), so that its run
        is redone; returns the quarantine folder as users name it."""
        folder = self.root / "quarantine"
        self.verified_files.drop(damage.run_key)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for path in (self.record_path(damage.run_key), self.trace_path(damage.run_key)):
            if self._info(path).type == pafs.FileType.File:
                if self._lock is not None:
                    self._lock.check()
                try:
                    self.fs.create_dir(str(folder), recursive=True)
                    self.fs.move(str(path), str(folder / f"{path.name}.{stamp}"))
                except OSError as e:
                    raise StoreError(
                        e.errno,
                        f"cannot move {self.show(path)} to {self.show(folder)}: {first_line(e)}",
                    ) from None
        return self.show(folder)

    # -- reading -----------------------------------------------------------------------------
    def scan(self, *, trust_unchanged: bool = False) -> Scan:
        """Every record, read once and checked against its checksum, and each done run's trace
        against the size and checksum in its record. With ``trust_unchanged``, a file whose
        signature (``signature``) is the one it had when this store last wrote or verified it
        (``verified.json``) is not hashed again: see ``VerifiedFiles`` for what that still
        detects. The folder is listed once (one listing request per 1,000 files on S3), then
        the records are read, then the traces to hash (each read ``_read_many``)."""
        scan = Scan()
        try:
            listed = self.fs.get_file_info(pafs.FileSelector(str(self.runs), allow_not_found=True))
        except OSError as e:
            raise StoreError(
                e.errno, f"cannot list {self.show(self.runs)}: {first_line(e)}"
            ) from None
        files = {i.base_name: i for i in listed if i.type == pafs.FileType.File}
        with _no_cyclic_gc():
            known = self.verified_files.load() if trust_unchanged else {}
            return self._scan(files, known, scan)

    def _scan(self, files: dict[str, pafs.FileInfo], known: dict[str, list], scan: Scan) -> Scan:
        names = sorted(n for n in files if n.endswith(".json"))
        intact: dict[str, tuple[dict, list[int], list[int] | None]] = {}
        to_hash: list[str] = []  # the done runs whose trace changed since it was verified
        for name, data in zip(names, self._read_many([files[n].path for n in names])):
            key = name[: -len(".json")]
            try:
                record, record_sig, trace_sig, rehash = self._check_entry(
                    files, name, key, data, known.get(key) or (None, None)
                )
            except DamagedFile as e:
                e.run_key = e.run_key or key
                scan.damaged.append(e)
                continue
            if rehash:
                to_hash.append(key)
            intact[key] = (record, record_sig, trace_sig)
        self._hash_traces(files, to_hash, intact, scan)
        for key, (record, record_sig, trace_sig) in sorted(intact.items()):
            self.verified_files.add(key, record_sig, trace_sig)
            scan.records[key] = record
        scan.damaged.sort(key=lambda e: e.run_key)
        return scan

    def _check_entry(
        self, files: dict[str, pafs.FileInfo], name: str, key: str, data: bytes | None, trusted
    ) -> tuple[dict, list[int], list[int] | None, bool]:
        """(record, its signature, its trace's signature, whether the trace must be hashed)
        of run ``key``, whose record file ``name`` holds ``data``; the checksums are checked
        unless ``trusted`` (the signatures last verified) says the file is unchanged. Raises
        DamagedFile."""
        record, record_sig = self._read_record(files[name], key, data)
        if trusted[0] != record_sig:
            self._check_record_sha(record, key)
        if record["status"] != "done":
            return record, record_sig, None, False
        trace_sig = self._check_trace(record, files.get(f"{key}.parquet"))
        return record, record_sig, trace_sig, trace_sig is not None and trace_sig != trusted[1]

    def _hash_traces(
        self,
        files: dict[str, pafs.FileInfo],
        to_hash: list[str],
        intact: dict[str, tuple],
        scan: Scan,
    ) -> None:
        """Hash the traces of ``to_hash`` against their records' sha256; a mismatch or a
        missing trace moves the run from ``intact`` to ``scan.damaged``."""
        traces = self._read_many([files[f"{key}.parquet"].path for key in to_hash])
        for key, data in zip(to_hash, traces):
            if data is None or hashlib.sha256(data).hexdigest() != intact[key][0]["trace_sha256"]:
                why = "trace missing" if data is None else "trace content does not match its sha256"
                scan.damaged.append(DamagedFile(self.show(self.trace_path(key)), why, key))
                del intact[key]

    def _read_many(self, paths: list[str]) -> Iterator[bytes | None]:
        """The bytes of each file (None: missing), in order (paths as plain strings: 20,000
        pathlib paths cost a second). On an object store, where each read is a round trip,
        ``_READERS`` at a time."""

        def read(path: str) -> bytes | None:
            try:
                return self._read(path)
            except FileNotFoundError:
                return None

        if self.location.local:
            yield from map(read, paths)
            return
        with ThreadPoolExecutor(_READERS) as pool:
            yield from pool.map(read, paths)

    def _read_record(
        self, info: pafs.FileInfo, key: str, data: bytes | None = None
    ) -> tuple[dict, list[int]]:
        """The record of ``key`` in the file ``info`` (its bytes ``data``, if read already)
        and the signature it was read with."""
        try:
            data = self._read(info.path) if data is None else data
        except FileNotFoundError:
            raise DamagedFile(self.show(self.record_path(key)), "record missing", key) from None
        try:
            record = json.loads(data, object_pairs_hook=_interned_keys)
        except ValueError:
            _parse_json(self.show(self.record_path(key)), data)  # raises, naming the file
        if not isinstance(record, dict) or record.get("run_key") != key:
            raise DamagedFile(
                self.show(self.record_path(key)), "not a run record of this store", key
            )
        return record, signature(self.location, info)

    def _check_record_sha(self, record: dict, key: str) -> None:
        want = record.get("sha256")  # records written before checksums have none
        if want is not None and hashlib.sha256(_canonical(record)).hexdigest() != want:
            raise DamagedFile(
                self.show(self.record_path(key)), "content does not match its sha256", key
            )

    def _verified_record(self, key: str) -> dict:
        record, _ = self._read_record(self._info(self.record_path(key)), key)
        self._check_record_sha(record, key)
        return record

    def _check_trace(self, record: dict, info: pafs.FileInfo | None) -> list[int] | None:
        """Check that a done run's trace is there (``info``: its file as listed, None when
        missing) with the size its record says; returns its signature (None: written before
        checksums, nothing to check). Its bytes are hashed by the caller."""
        key = record["run_key"]
        if info is None:
            raise DamagedFile(self.show(self.trace_path(key)), "trace missing", key)
        if record.get("trace_sha256") is None:
            return None
        sig = signature(self.location, info)
        size = sig[0]
        if size != record["trace_bytes"]:
            raise DamagedFile(
                self.show(self.trace_path(key)),
                f"trace truncated or extended ({size} bytes, {record['trace_bytes']} written)",
                key,
            )
        return sig

    def holds_records(self) -> bool:
        """Whether any run record is stored (one listing of ``runs/``)."""
        listed = self.fs.get_file_info(pafs.FileSelector(str(self.runs), allow_not_found=True))
        return any(i.base_name.endswith(".json") for i in listed)

    def verified(self, *, trust_unchanged: bool = False) -> Scan:
        """``scan``, refusing any damaged file (for readers: ``farm report``, ``farm sync``);
        ``trust_unchanged`` as ``scan``'s."""
        scan = self.scan(trust_unchanged=trust_unchanged)
        if scan.damaged:
            first = scan.damaged[0]
            more = f" (and {len(scan.damaged) - 1} more)" if len(scan.damaged) > 1 else ""
            raise DamagedFile(
                first.path,
                f"{first.why}{more}; run the sweep again to redo damaged runs",
                first.run_key,
            )
        return scan

    def records(self) -> Iterable[dict]:
        return self.verified().records.values()

    def record(self, run_key: str) -> dict | None:
        info = self._info(self.record_path(run_key))
        return self._verified_record(run_key) if info.type == pafs.FileType.File else None

    def finished(self) -> set[str]:
        """run_keys whose record says done and whose record and trace are intact."""
        return self.verified().finished()

    def trace(self, run_key: str, columns: Iterable[str] | None = None) -> pa.Table:
        """The run's trace; with ``columns``, only those of them the trace has (a trace
        written before a column was added lacks it). No dataset discovery: a report reads
        20,000 of them."""
        path = self.trace_path(run_key)
        try:
            file = pq.ParquetFile(pa.BufferReader(self._read(path)))
            names = set(file.schema_arrow.names)
            return file.read(
                columns=None if columns is None else [c for c in columns if c in names],
                use_threads=False,
            )
        except FileNotFoundError:
            raise DamagedFile(self.show(path), "trace missing", run_key) from None
        except pa.ArrowInvalid as e:
            raise DamagedFile(
                self.show(path), f"not a readable Parquet file ({e})", run_key
            ) from None

    def read_sweep(self) -> dict[str, Any] | None:
        """``sweep.json`` as written (spec and sweep id); None when there is none. DamagedFile
        when its content does not match its checksum (edited: another sweep id would log every
        stored run to MLflow again; other limits would describe other runs)."""
        path = self.root / "sweep.json"
        try:
            data = _parse_json(self.show(path), self._read(path))
        except FileNotFoundError:
            return None
        if not isinstance(data, dict):
            raise DamagedFile(self.show(path), "not a sweep spec")
        want = data.pop("sha256", None)  # a sweep.json written before checksums has none
        if want is not None and hashlib.sha256(_canonical(data)).hexdigest() != want:
            raise DamagedFile(
                self.show(path),
                "content does not match its sha256 (edited since the sweep wrote it)",
            )
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
        self._write(self.root / "index.parquet", sink.getvalue().to_pybytes())
        return table

    def refresh_index(self, records: Iterable[dict]) -> None:
        """``write_index`` unless ``index.parquet`` was built from exactly these records (the
        digest of their checksums kept in its metadata): a resume that ran nothing rewrites
        nothing."""
        records = list(records)
        digest = _records_digest(records)
        try:
            metadata = (
                pq.read_schema(str(self.root / "index.parquet"), filesystem=self.fs).metadata or {}
            )
        except (OSError, pa.ArrowInvalid):  # missing or damaged: rebuilt
            metadata = {}
        if digest is None or metadata.get(INDEX_DIGEST) != digest.encode():
            self.write_index(records)


@contextlib.contextmanager
def _no_cyclic_gc():
    """Python's cyclic garbage collector paused for the block: parsing 20,000 records
    allocates about a million containers, and the collector's passes over the growing heap
    cost 40% of the parsing (measured); records hold no reference cycles (reference counting
    frees them as before)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _interned_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are shared with every other record's (``sys.intern``): the
    20,000 records of a sweep repeat the same hundred keys, which as copies are about 40% of
    their memory (225 MB parsed as copies, 126 MB shared, measured; 10% more parsing time)."""
    return {sys.intern(k): v for k, v in pairs}


INDEX_DIGEST = b"optfarm.records_sha256"
_READERS = 32  # files read at once from an object store


def _records_digest(records: list[dict]) -> str | None:
    """A digest of the records' own checksums (None if one has none: written before them)."""
    sums = sorted(r.get("sha256") or "" for r in records)
    if not all(sums):
        return None
    return hashlib.sha256("".join(sums).encode()).hexdigest()


def _index_row(r: dict) -> dict:
    spec, s = r["spec"], r.get("summary") or {}
    rec, metric = s.get("recommendation"), s.get("metric")
    final = final_quality(s) if s else None
    return {
        "run_key": r["run_key"],
        "dataset": spec["dataset"],
        "optimizer": spec["optimizer"],
        "params": json.dumps(spec["params"], sort_keys=True),
        "seed": spec["seed"],
        "status": r["status"],
        "error": r.get("error"),
        "attempts": r["attempts"],
        "metric": metric,
        "final_metric": final,
        "final_feasible": bool(rec and rec["feasible"]) if s else None,
        "n_evaluations": s.get("n_evaluations"),
        "exploration_cost": s.get("exploration_cost"),
        "stop_reason": s.get("stop_reason"),
        "median_latency_s": (s.get("recommendation_latency_s") or {}).get("median"),
        "duration_s": r.get("duration_s"),
        "cpu_s": r.get("cpu_s"),
        "node_id": r["where"].get("node_id"),
        "pid": r["where"].get("pid"),
        "finished_at": r["finished_at"],
    }
