"""Where a sweep's results live: a path on this machine (a local disk or a mounted shared
file system) or a ``pyarrow.fs`` URI (``s3://bucket/path``, ``gs://bucket/path``), read and
written through one ``pyarrow.fs.FileSystem`` (``Location``), each file atomically
(``write_atomically``). The store (``optfarm.farm.store.store``) and its locks
(``optfarm.farm.store.locks``) are built on it.
"""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePath, PurePosixPath
from urllib.parse import parse_qsl

import pyarrow.fs as pafs

from optfarm.oracle.atomic_files import TEMPORARY_SUFFIX, temporary_name

__all__ = ["Location", "LocationError", "StoreError", "first_line", "write_atomically"]


class StoreError(OSError):
    """A file of the store cannot be written or read (disk full, read-only folder, a server
    that does not answer, ...); the message is one line naming the path. ``during_runs``:
    raised once a sweep had begun storing runs (``optfarm.farm.sweep.runner``), so some may
    be stored."""

    during_runs = False

    def __init__(self, code: int | None, message: str):
        super().__init__(message)
        self.errno = code


class LocationError(ValueError):
    """An output folder that names no usable store (a URI ``pyarrow.fs`` cannot resolve, or a
    kind of store a sweep cannot lock); the message is one line naming it."""


@dataclass(frozen=True)
class Location:
    """Where a store lives: a ``pyarrow.fs`` file system and the folder in it. ``root`` is a
    ``Path`` on this machine's file system (as given: messages name it as the user did), a
    ``PurePosixPath`` (``bucket/path``) on an object store; ``uri`` names it for users."""

    fs: pafs.FileSystem
    root: PurePath
    uri: str
    options: dict[str, str] = field(default_factory=dict)  # the URI's query (endpoint, ...)

    @classmethod
    def of(cls, out: str | Path | Location) -> Location:
        """The location of ``out``: a path, or a URI ``pyarrow.fs`` knows (``s3://``,
        ``gs://``, ``file://``, ...). A URI it cannot resolve raises LocationError."""
        if isinstance(out, Location):
            return out
        text = str(out)
        if isinstance(out, Path) or "://" not in text:
            return cls(pafs.LocalFileSystem(), Path(out), text)
        try:
            fs, path = pafs.FileSystem.from_uri(text)
        except OSError as e:  # the server asked for the bucket's region does not answer
            raise StoreError(None, f"cannot reach {text}: {first_line(e)}") from None
        except ValueError as e:  # unknown scheme, bad bucket name, ...
            raise LocationError(f"cannot open {text}: {first_line(e)}") from None
        if isinstance(fs, pafs.LocalFileSystem):
            return cls(fs, Path(path), path)
        base, _, query = text.partition("?")
        return cls(fs, PurePosixPath(path), base.rstrip("/"), dict(parse_qsl(query)))

    def reach(self) -> None:
        """StoreError ``cannot reach URI`` unless the store's server answers (a local folder
        always does): one request, before a command relies on it."""
        if self.local:
            return
        try:
            self.fs.get_file_info(str(self.root))
        except OSError as e:
            raise StoreError(None, f"cannot reach {self.uri}: {first_line(e)}") from None

    @property
    def local(self) -> bool:
        """Whether the store is on this machine's file system (a local or mounted folder)."""
        return isinstance(self.fs, pafs.LocalFileSystem)

    def show(self, path: PurePath) -> str:
        """``path`` (in this location) as users name it."""
        if self.local:
            return str(path)
        return self.uri + "/" + PurePosixPath(path).relative_to(self.root).as_posix()

    def absolute(self, path: PurePath | None = None) -> str:
        """``path`` (default: the folder) named from anywhere: resolved, or as a URI."""
        path = self.root if path is None else path
        return str(Path(path).resolve()) if self.local else self.show(path)

    def __truediv__(self, name: str) -> Location:
        """The location of a folder inside this one."""
        return Location(self.fs, self.root / name, f"{self.uri.rstrip('/')}/{name}", self.options)

    def empty(self) -> bool:
        """Whether nothing is stored in this folder (or it does not exist)."""
        listed = self.fs.get_file_info(pafs.FileSelector(str(self.root), allow_not_found=True))
        return not listed

    @contextlib.contextmanager
    def mirrored(self):
        """A folder of this machine holding this location's files for the block, for code
        that reads and writes local files: the folder itself when it is a path; else a
        temporary copy, whose files are uploaded when the block ends (an error included: what
        was written is kept)."""
        if self.local:
            Path(self.root).mkdir(parents=True, exist_ok=True)
            yield Path(self.root)
            return
        with tempfile.TemporaryDirectory(prefix="optfarm-") as tmp:
            listed = self.fs.get_file_info(
                pafs.FileSelector(str(self.root), recursive=True, allow_not_found=True)
            )
            before = {}
            for info in listed:
                if info.type == pafs.FileType.File:
                    name = PurePosixPath(info.path).relative_to(self.root).as_posix()
                    with self.fs.open_input_stream(info.path) as f:
                        before[name] = f.read()
                    (Path(tmp) / name).parent.mkdir(parents=True, exist_ok=True)
                    (Path(tmp) / name).write_bytes(before[name])
            try:
                yield Path(tmp)
            finally:
                for path in sorted(Path(tmp).rglob("*")):
                    name = path.relative_to(tmp).as_posix()
                    if (
                        path.is_file()
                        and not name.endswith(TEMPORARY_SUFFIX)
                        and path.read_bytes() != before.get(name)
                    ):
                        write_atomically(
                            self.fs,
                            self.root / name,
                            path.read_bytes(),
                            self.show(self.root / name),
                        )

    @contextlib.contextmanager
    def staged(self):
        """A folder of this machine whose files end up in this location: the folder itself
        when it is a path; else a temporary folder, each of its files uploaded (one atomic
        upload each) when the block ends without an error."""
        if self.local:
            Path(self.root).mkdir(parents=True, exist_ok=True)
            yield Path(self.root)
            return
        with tempfile.TemporaryDirectory(prefix="optfarm-") as tmp:
            yield Path(tmp)
            for path in sorted(Path(tmp).rglob("*")):
                if path.is_file():
                    target = self.root / path.relative_to(tmp).as_posix()
                    write_atomically(self.fs, target, path.read_bytes(), self.show(target))

    @property
    def local_dir(self) -> Path:
        """A folder of this machine for what cannot live in the store (``mlflow.db``,
        ``mlflow_runs.jsonl``): the store's own folder when it is a path, else one per URI in
        the data cache (``$OPTFARM_DATA/outs/<scheme>/<bucket>/<path>``, created here)."""
        if self.local:
            return Path(self.root).resolve()
        from optfarm.oracle.cache import data_dir

        scheme, _, rest = self.uri.partition("://")
        folder = data_dir() / "outs" / scheme / rest
        folder.mkdir(parents=True, exist_ok=True)
        return folder


def write_atomically(
    fs: pafs.FileSystem, path: PurePath, data: bytes, shown: str | None = None
) -> None:
    """Write ``data`` to ``path`` so that readers see the whole file or none of it: on an
    object store (S3, GCS) one upload, which is atomic per object; elsewhere under a
    temporary name in the same folder, then renamed. Raises StoreError naming the path (as
    ``shown``, if given)."""
    tmp = None
    try:
        if fs.type_name in _ATOMIC_UPLOADS:
            with fs.open_output_stream(str(path)) as f:
                f.write(data)
            return
        fs.create_dir(str(path.parent), recursive=True)
        tmp = f"{path.parent}/{temporary_name(path)}"
        with fs.open_output_stream(tmp) as f:
            f.write(data)
        fs.move(tmp, str(path))
    except BaseException as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                fs.delete_file(tmp)
        if isinstance(e, OSError) and not isinstance(e, StoreError):
            raise StoreError(e.errno, f"cannot write {shown or path}: {first_line(e)}") from None
        raise


_ATOMIC_UPLOADS = {"s3", "gcs"}  # pyarrow file systems whose objects appear whole or not at all


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__
