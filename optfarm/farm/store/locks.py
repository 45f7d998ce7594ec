"""One driver per store: the lock a sweep holds on its output for the life of its driver
(``lock_for``).

- On a path (a local disk or a shared file system): ``FolderLock``, ``flock`` on ``OUT/lock``.
- On S3: ``ObjectLease``, a lease object ``OUT/lock`` that two drivers cannot both hold,
  written with S3's conditional writes (``If-None-Match``, ``If-Match``), which ``pyarrow.fs``
  does not expose: it talks to S3 through ``boto3``.

Every write of the store first asks its lock (``check``) whether it is still held.

The lease's protocol (every condition is checked by the server, atomically, per object):
- **Acquire**: create ``lock`` only if no object has that name (``If-None-Match: *``). Of two
  drivers racing, exactly one creation succeeds; the other gets ``412 Precondition Failed``.
- **Renew**: the holder rewrites ``lock`` every ``RENEW_S`` only if it is still the version it
  wrote last (``If-Match: <its ETag>``). A renewal refused means that another driver took the
  lease over: the holder stops writing.
- **Take over**: a lease the server says was last written ``TERM_S`` or more ago (the age is
  the server's ``Date`` less the object's ``Last-Modified``: one clock, the server's) is
  replaced only if it is still the version read (``If-Match``), so of two takers one wins. A
  driver that finds a fresh lease watches it for one renewal period: renewed, its holder is
  alive (``FolderBusy``, naming it); not renewed, it waits until the lease is ``TERM_S`` old.
  A holder on this host whose process is gone is taken over at once.
- **Release**: delete ``lock`` only if it is the version written last.

The guarantee: at any time at most one driver holds the lease. A holder writes to the store
only while its last successful renewal started less than ``TERM_S - MARGIN_S`` ago by its own
clock (``check``, before every write); a taker waits until the lease is ``TERM_S`` old by the
server's clock, which is after the holder's renewal request started. So the two drivers'
writes can overlap only if one write of the old holder is in flight for more than
``MARGIN_S`` (a stalled connection): the fencing limit of any lease without a token the
storage checks on each write. Even then each run key has one record object, so the store
keeps one record per run.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import threading
import time
import uuid
from email.utils import parsedate_to_datetime
from pathlib import Path

from optfarm.farm.store.location import Location, LocationError, StoreError

__all__ = ["FolderBusy", "FolderLock", "ObjectLease", "check_lockable", "lock_for"]


class FolderBusy(RuntimeError):
    """Another driver holds the output folder's lock; the message names it."""


class FolderLock:
    """An exclusive lock on a sweep's output folder for the life of a driver: ``flock`` on
    ``OUT/lock`` (released by the kernel on any exit, SIGKILL included) with the holder's pid,
    host and command written in it. Where ``flock`` is not supported (some network file
    systems) the recorded pid is checked instead: a holder on this host that is gone is a
    stale lock and is taken over."""

    def __init__(self, root: str | Path):
        self.path = Path(root) / "lock"
        self._fd: int | None = None

    def __enter__(self) -> FolderLock:
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
            raise FolderBusy(
                f"{self.path.parent} is in use by another sweep ("
                f"{describe_holder(holder)}); wait for it to end or stop it"
            ) from None
        except OSError as e:
            if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                os.close(fd)
                raise StoreError(e.errno, f"cannot lock {self.path}: {e.strerror}") from None
            holder = self._holder(fd)
            if holder and holder_alive(holder):
                os.close(fd)
                raise FolderBusy(
                    f"{self.path.parent} is in use by another sweep "
                    f"({describe_holder(holder)}); wait for it to end or stop it, or "
                    f"remove {self.path} if it no longer runs"
                ) from None
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.time(),
            "command": " ".join(sys.argv)[:500],
        }
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

    def check(self) -> None:
        """Nothing to check: the kernel holds a ``flock`` until it is released."""

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # the flock goes with the descriptor
            self._fd = None


def holder_alive(holder: dict) -> bool:
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


def describe_holder(holder: dict | None) -> str:
    if not holder:
        return "holder unknown"
    since = time.strftime("%H:%M:%S", time.localtime(holder.get("since", 0)))
    state = "" if holder_alive(holder) else ", gone: the lock is held by a process it started"
    return (
        f"pid {holder.get('pid')} on {holder.get('host')} since {since}{state}: "
        f"{holder.get('command', '?')}"
    )


TERM_S = 30.0  # a lease not renewed for this long (server clock) may be taken over
RENEW_S = 5.0  # the holder renews it this often
MARGIN_S = 10.0  # the holder stops writing this long before its lease could be taken over


def lock_for(location: Location) -> FolderLock | ObjectLease:
    """The lock of a store at ``location`` (not yet taken): ``FolderLock`` on a path,
    ``ObjectLease`` on S3; LocationError for a kind of store no driver can lock here."""
    check_lockable(location)
    return FolderLock(location.root) if location.local else ObjectLease(location)


def check_lockable(location: Location) -> None:
    """LocationError for a kind of store no driver can lock here (checked before anything
    reads the store: reading a store of another kind may wait long on its credentials)."""
    if not (location.local or location.fs.type_name == "s3"):
        raise LocationError(
            f"{location.uri}: a sweep cannot lock a {location.fs.type_name} "
            "store (it writes to a path or to s3://)"
        )


class ObjectLease:
    """The lease on ``location/lock`` (an ``s3://`` store) for the life of a driver; a context
    manager like ``FolderLock``. ``term_s`` and ``renew_s`` are for tests."""

    def __init__(
        self,
        location: Location,
        term_s: float = TERM_S,
        renew_s: float = RENEW_S,
        margin_s: float = MARGIN_S,
    ):
        bucket, _, prefix = location.root.as_posix().partition("/")
        self.bucket, self.key = bucket, f"{prefix}/lock" if prefix else "lock"
        self.shown = f"{location.uri}/lock"
        self.where = location.uri
        self.term_s, self.renew_s, self.margin_s = term_s, renew_s, margin_s
        self._client = _client(location)
        self._etag: str | None = None
        self._valid_until = 0.0  # monotonic: writes stop then unless renewed
        self._lost: str | None = None  # why the lease was lost
        self._since = time.time()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def __enter__(self) -> ObjectLease:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    # -- acquire -------------------------------------------------------------------------------
    def acquire(self) -> None:
        watched: tuple[str, float] | None = None  # (ETag, when first seen) of a fresh lease
        while True:
            started = time.monotonic()
            if self._put(IfNoneMatch="*"):
                break
            found = self._get()
            if found is None:
                continue  # released meanwhile: try again
            etag, holder, age = found
            if age >= self.term_s or (holder and not holder_alive(holder)):
                started = time.monotonic()
                if self._put(IfMatch=etag):
                    print(
                        f"farm: took over {self.shown} from {describe_holder(holder)} "
                        f"(not renewed for {age:.0f} s)",
                        file=sys.stderr,
                    )
                    break
                continue  # another driver took it or the holder renewed: look again
            if watched is None or watched[0] != etag:
                if watched is not None:  # renewed while watched: its holder is alive
                    raise FolderBusy(
                        f"{self.where} is in use by another sweep ("
                        f"{describe_holder(holder)}; its lease was renewed "
                        f"{age:.0f} s ago); wait for it to end or stop it"
                    )
                watched = (etag, time.monotonic())
            time.sleep(min(self.renew_s, max(0.1, self.term_s - age)) + 0.5)
        self._valid_until = started + self.term_s - self.margin_s
        self._renewer = threading.Thread(target=self._renew, name="optfarm-lease", daemon=True)
        self._renewer.start()

    # -- hold ----------------------------------------------------------------------------------
    def _renew(self) -> None:
        while not self._stop.wait(self.renew_s):
            started = time.monotonic()
            try:
                if not self._put(IfMatch=self._etag):
                    self._lost = "another driver took it over"
                    return
            except StoreError:
                continue  # the server unreachable: writes stop when the lease runs out
            self._valid_until = started + self.term_s - self.margin_s

    def check(self) -> None:
        """Raise StoreError unless this driver still holds the lease (checked before each
        write of the store)."""
        if self._lost is None and time.monotonic() >= self._valid_until:
            self._lost = f"not renewed for {self.term_s - self.margin_s:.0f} s"
        if self._lost is not None:
            raise StoreError(
                None, f"lost the lease {self.shown} ({self._lost}); this driver stopped writing"
            )

    def release(self) -> None:
        self._stop.set()
        if self._renewer is None:
            return
        self._renewer.join()
        self._renewer = None
        if self._lost is None:
            from botocore.exceptions import BotoCoreError, ClientError

            # refused (taken over) or the server gone: the lease runs out by itself
            with contextlib.suppress(BotoCoreError, ClientError):
                self._client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=self._etag)

    # -- S3 ------------------------------------------------------------------------------------
    def _put(self, **condition) -> bool:
        """Write the lease under ``condition``; False when the server refuses the condition."""
        from botocore.exceptions import BotoCoreError, ClientError

        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": self._since,
            "command": " ".join(sys.argv)[:500],
            "token": uuid.uuid4().hex,
        }
        try:
            answer = self._client.put_object(
                Bucket=self.bucket, Key=self.key, Body=json.dumps(me).encode(), **condition
            )
        except ClientError as e:
            if _code(e) in ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey"):
                return False
            raise StoreError(None, f"cannot write {self.shown}: {e}") from None
        except BotoCoreError as e:
            raise StoreError(None, f"cannot write {self.shown}: {e}") from None
        self._etag = answer["ETag"]
        return True

    def _get(self) -> tuple[str, dict | None, float] | None:
        """(ETag, holder, age in s by the server's clock) of the lease; None if there is none."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self._client.get_object(Bucket=self.bucket, Key=self.key)
            body = answer["Body"].read()
        except ClientError as e:
            if _code(e) == "NoSuchKey":
                return None
            raise StoreError(None, f"cannot read {self.shown}: {e}") from None
        except BotoCoreError as e:
            raise StoreError(None, f"cannot read {self.shown}: {e}") from None
        now = parsedate_to_datetime(answer["ResponseMetadata"]["HTTPHeaders"]["date"])
        try:
            holder = json.loads(body)
        except ValueError:
            holder = None
        return (
            answer["ETag"],
            holder if isinstance(holder, dict) else None,
            (now - answer["LastModified"]).total_seconds(),
        )


def _code(e) -> str:
    return e.response.get("Error", {}).get("Code", "")


def _client(location: Location):
    """A boto3 S3 client for the store at ``location``: its endpoint and region from the
    URI's ``endpoint_override``, ``scheme`` and ``region`` (as ``pyarrow.fs`` reads them), else
    from the environment (``AWS_ENDPOINT_URL``, ``AWS_REGION``, ...) as for any AWS client."""
    try:
        import boto3
    except ImportError:
        raise StoreError(
            None,
            f"{location.uri}: a sweep on S3 takes its lock with boto3: pip install 'optfarm[s3]'",
        ) from None
    options = location.options
    endpoint = options.get("endpoint_override")
    if endpoint and "://" not in endpoint:
        endpoint = f"{options.get('scheme', 'https')}://{endpoint}"
    return boto3.client("s3", endpoint_url=endpoint, region_name=options.get("region"))
