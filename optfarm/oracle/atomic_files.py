"""Writing a file so that a reader sees all of it or none of it, defined once for the whole
farm (ARCHITECTURE.md, "Habits" 7): the bytes go to a temporary name beside the file, unique
to this writer (two writers never share one, a crashed writer's leftover is never reused),
then one rename puts them in place; the temporary is removed when the write fails.

``write_file_atomically`` writes a path of this machine (a downloaded dataset, the dataset
manifest, a regression baseline, a local cluster's state); ``optfarm.farm.store.location``'s
``write_atomically`` writes through a ``pyarrow.fs`` file system with the same temporary name.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path, PurePath

__all__ = ["TEMPORARY_SUFFIX", "temporary_name", "write_file_atomically"]

TEMPORARY_SUFFIX = ".tmp"


def temporary_name(path: PurePath) -> str:
    """The name ``path``'s bytes are written under before the rename: hidden, unique to this
    writer, ending in ``TEMPORARY_SUFFIX`` (``.baseline.json.3f2a9c0d11e4.tmp``)."""
    return f".{path.name}.{uuid.uuid4().hex[:12]}{TEMPORARY_SUFFIX}"


def write_file_atomically(path: str | os.PathLike, data: bytes | str) -> None:
    """Write ``data`` (text as UTF-8) to ``path``, whole or not at all; its folder must exist.
    An OSError of the write or the rename propagates, nothing left behind."""
    path = Path(path)
    tmp = path.with_name(temporary_name(path))
    try:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
