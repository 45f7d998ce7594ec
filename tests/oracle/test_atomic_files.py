"""Writing a local file whole or not at all (``optfarm.oracle.atomic_files``): the temporary name is
unique to the writer and gone afterwards, a failed write leaves the old file as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from optfarm.oracle.atomic_files import TEMPORARY_SUFFIX, temporary_name, write_file_atomically


def test_a_write_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "baseline.json"
    write_file_atomically(path, "old\n")
    write_file_atomically(path, b"new\n")
    assert path.read_text() == "new\n" and [p.name for p in tmp_path.iterdir()] == [path.name]


def test_two_writers_never_share_a_temporary_name():
    names = {temporary_name(Path("a/cluster.json")) for _ in range(1000)}
    assert len(names) == 1000
    assert all(n.startswith(".cluster.json.") and n.endswith(TEMPORARY_SUFFIX) for n in names)


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary(tmp_path):
    path = tmp_path / "manifest.tsv"
    write_file_atomically(path, "kept\n")
    (tmp_path / "dir.json").mkdir()  # a folder where the file would go: the rename fails
    with pytest.raises(OSError):
        write_file_atomically(tmp_path / "dir.json", "lost\n")
    assert path.read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.json", "manifest.tsv"]
