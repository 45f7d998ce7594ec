"""Where every importable public dataset comes from, and ``farm datasets fetch``.

``SOURCES[name] = Source(format, repository, files)``, ``files`` a list of
``(raw download URL, relative path)``; the relative path is the file's place in a local copy
laid out like the shared datasets folder (``trimtuner/cnn.csv``, ``scout/<workload>/...``).

``fetch(names)`` downloads the files a dataset needs into ``sources_dir()`` (urllib, short
timeout; files already there are kept) and imports them; ``fetch(names, from_dir=DIR)`` takes
them from a local copy laid out either like the shared folder (``DIR/trimtuner/cnn.csv``) or
like the upstream repository (``DIR/tests/files/cnn.csv``), or from ``DIR`` itself holding the
files. Offline (``OPTFARM_OFFLINE=1``, or the first download fails) it raises one DatasetError
line for every missing file at once and writes a manifest of which file goes where.
Every dataset is validated before any is written, so a failed fetch leaves the cache as it was.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from .atomic_files import write_file_atomically
from .cache import data_dir
from .dataset import Dataset, DatasetError
from .spelling import did_you_mean

__all__ = ["MANIFEST_NAME", "SOURCES", "TIMEOUT_S", "Source", "download", "fetch", "sources_dir"]

TIMEOUT_S = 10.0


class Source(NamedTuple):
    format: str
    repository: str
    files: list[tuple[str, str]]  # (raw download URL, relative path in a local copy)

    @property
    def import_path(self) -> str:
        """What ``farm datasets import FORMAT --from`` takes, relative to a local copy: the
        file itself, or the folder holding all the files."""
        if len(self.files) == 1:
            return self.files[0][1]
        return os.path.commonpath([rel for _, rel in self.files])


def _raw(repo: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repo}/HEAD/{path}"


def _github(repo: str) -> str:
    return f"https://github.com/{repo}"


TRIMTUNER = "pedrogbmendes/TrimTuner"
LYNCEUS = "marialcasimiro/Lynceus-ICDCS"
MALIBOO = "RobertoSala98/MALIBOO"
SCOUT_UPSTREAM = "data/scout/osr_multiple_nodes_original"
# Scout: workload folder -> the run-name part of its run folders (<N>_<vm>_<run name>_1)
SCOUT_WORKLOADS = {
    "join_bigdata_spark": "join_spark_bigdata",
    "join_huge_spark": "join_spark_huge",
    "kmeans_bigdata_spark15": "kmeans_spark1.5_bigdata",
    "kmeans_huge_spark15": "kmeans_spark1.5_huge",
    "lr_bigdata_spark": "lr_spark_bigdata",
    "lr_huge_spark": "lr_spark_huge",
    "naive-bayes_bigdata_spark15": "naive-bayes_spark1.5_bigdata",
    "naive-bayes_huge_spark15": "naive-bayes_spark1.5_huge",
    "pagerank_bigdata_hadoop": "pagerank_hadoop_bigdata",
    "pagerank_bigdata_spark": "pagerank_spark_bigdata",
    "pagerank_huge_hadoop": "pagerank_hadoop_huge",
    "pagerank_huge_spark": "pagerank_spark_huge",
    "regression_bigdata_spark15": "regression_spark1.5_bigdata",
    "regression_huge_spark15": "regression_spark1.5_huge",
    "terasort_bigdata_hadoop": "terasort_hadoop_bigdata",
    "terasort_huge_hadoop": "terasort_hadoop_huge",
    "wordcount-large_bigdata_hadoop": "wordcount_hadoop_bigdata",
    "wordcount-large_huge_hadoop": "wordcount_hadoop_huge",
}
# The 69 Scout cluster configurations: cluster sizes per instance size, for c4, m4 and r4.
SCOUT_SIZES = {
    "large": (4, 6, 8, 10, 12, 16, 24, 32, 40, 48),
    "xlarge": (4, 6, 8, 10, 12, 16, 20, 24),
    "2xlarge": (4, 6, 8, 10, 12),
}


def _scout_files(workload: str) -> list[tuple[str, str]]:
    run = SCOUT_WORKLOADS[workload]
    files = []
    for family in ("c4", "m4", "r4"):
        for size, counts in SCOUT_SIZES.items():
            for n in counts:
                rel = f"{workload}/{n}_{family}.{size}_{run}_1/report.json"
                files.append((_raw(LYNCEUS, f"{SCOUT_UPSTREAM}/{rel}"), f"scout/{rel}"))
    return files


def _sources() -> dict[str, Source]:
    out = {}
    for net in ("cnn", "rnn"):
        out[f"trimtuner-{net}"] = Source(
            "trimtuner",
            _github(TRIMTUNER),
            [(_raw(TRIMTUNER, f"tests/files/{net}.csv"), f"trimtuner/{net}.csv")],
        )
    for net, stem in (
        ("cnn", "t2_cnn_intermediate_values"),
        ("multilayer", "t2_multilayer_intermediate_values"),
        ("rnn", "t2_rnn"),
    ):
        out[f"lynceus-{net}"] = Source(
            "lynceus",
            _github(LYNCEUS),
            [(_raw(LYNCEUS, f"files/{stem}.csv"), f"lynceus/{stem}.csv")],
        )
    for job in ("kmeans", "spark", "terasort", "tpcds", "tpch"):
        out[f"cherrypick-{job}"] = Source(
            "cherrypick",
            _github(LYNCEUS),
            [(_raw(LYNCEUS, f"data/cherrypick/CP_{job}.csv"), f"cherrypick/CP_{job}.csv")],
        )
    for workload in SCOUT_WORKLOADS:
        out[f"scout-{workload}"] = Source("scout", _github(LYNCEUS), _scout_files(workload))
    for name, stem in (
        ("guindani-kmeans", "kmeans_monodimensional"),
        ("guindani-query26", "query26_monodimensional"),
        ("guindani-query26-vm-ram", "query26_vm_ram"),
    ):
        out[name] = Source(
            "guindani",
            _github(MALIBOO),
            [(_raw(MALIBOO, f"resources/{stem}.csv"), f"guindani/{stem}.csv")],
        )
    return out


SOURCES: dict[str, Source] = _sources()


def sources_dir() -> Path:
    """Where ``fetch`` keeps the published files it downloads or reads ``--from`` a folder,
    laid out like the shared datasets folder (``trimtuner/cnn.csv``, ``scout/<workload>/...``):
    files already there are not downloaded again, and the tests read the real data from here
    when no other copy exists."""
    return data_dir() / "sources"


def fetch(
    names: Sequence[str],
    from_dir: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[str]:
    """Import the public datasets ``names`` (``"all"``: every name in SOURCES) into the cache,
    from ``from_dir`` or by downloading (into ``sources_dir()``); return the names imported.

    Files that cannot be found or downloaded are reported all at once: one DatasetError line,
    and a manifest (``MANIFEST_NAME`` in the cache folder) saying which file goes where.
    ``progress(done, total)`` follows the downloads."""
    from .formats import FORMATS

    wanted = list(SOURCES) if "all" in names else list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in SOURCES]
    if unknown:
        raise DatasetError(
            f"unknown dataset {unknown[0]!r}{did_you_mean(unknown[0], SOURCES)}"
            " (`farm datasets fetch all` fetches every public dataset)"
        )
    if from_dir is None:
        root, why = sources_dir(), download(wanted, sources_dir(), progress)
    else:
        root, why = Path(from_dir), None
        if not root.is_dir():
            raise DatasetError(f"{root}: no such folder (--from takes a local copy of the data)")
    found = {name: _locate(SOURCES[name], root) for name in wanted}
    missing = {name: [f for f, path in files if path is None] for name, files in found.items()}
    missing = {name: files for name, files in missing.items() if files}
    if missing:
        command = " ".join(["all"] if "all" in names else wanted)
        raise DatasetError(
            _missing_files(
                missing, why or f"not found under {root}", root, command, from_dir is not None
            )
        )
    datasets: list[Dataset] = []
    with tempfile.TemporaryDirectory(prefix="optfarm-fetch-") as tmp:
        for name in wanted:
            source = SOURCES[name]
            for (_, rel), path in found[name]:
                target = Path(tmp) / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
            datasets.extend(FORMATS[source.format](Path(tmp) / source.import_path, name=name))
    for d in datasets:
        d.write(data_dir() / f"{d.name}.parquet")
    if from_dir is not None:
        _keep_sources(found)
    _drop_manifest(wanted)
    return [d.name for d in datasets]


def _keep_sources(found: dict[str, list[tuple[tuple[str, str], Path | None]]]) -> None:
    """Copy the published files a fetch ``--from`` read into ``sources_dir()``, so that a
    later fetch, and the test suite, find them there (as if downloaded)."""
    root = sources_dir()
    for files in found.values():
        for (_, rel), path in files:
            target = root / rel
            if path is not None and path.resolve() != target.resolve():
                target.parent.mkdir(parents=True, exist_ok=True)
                write_file_atomically(target, path.read_bytes())


MANIFEST_NAME = "fetch-missing.tsv"


def _drop_manifest(fetched: Sequence[str]) -> None:
    """Remove the manifest of missing files once every dataset it lists is fetched."""
    manifest = data_dir() / MANIFEST_NAME
    if manifest.exists():
        listed = {line.split("\t", 1)[0] for line in manifest.read_text().splitlines()[1:]}
        if listed <= set(fetched):
            manifest.unlink(missing_ok=True)


def _upstream_path(url: str) -> str:
    return url.split("/HEAD/", 1)[1]


def _locate(source: Source, root: Path) -> list[tuple[tuple[str, str], Path | None]]:
    """Each (url, rel) file of ``source`` with its path under ``root`` (None: not there), in
    the shared folder's layout, the upstream repository's, or the files directly in ``root``."""
    out = []
    for url, rel in source.files:
        candidates = (
            root / rel,
            root / _upstream_path(url),
            root / Path(rel).relative_to(Path(rel).parts[0]),
        )
        out.append(((url, rel), next((c for c in candidates if c.is_file()), None)))
    return out


def download(
    names: Sequence[str], root: Path, progress: Callable[[int, int], None] | None = None
) -> str | None:
    """Download the files of datasets ``names`` that ``root`` lacks into ``root`` (its
    layout: the relative paths of SOURCES), each file written atomically. Returns None when
    every file is there, else why some are not (offline, or the first download error: the
    rest is not attempted)."""
    todo = [
        (url, rel)
        for name in names
        for (url, rel), path in _locate(SOURCES[name], root)
        if path is None
    ]
    if not todo:
        return None
    if os.environ.get("OPTFARM_OFFLINE"):
        return "offline: OPTFARM_OFFLINE is set"
    for i, (url, rel) in enumerate(todo):
        if progress is not None:
            progress(i, len(todo))
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
                write_file_atomically(target, response.read())
        except (urllib.error.URLError, OSError, ValueError) as e:
            return f"cannot download {url} ({getattr(e, 'reason', e)})"
    return None


def _missing_files(
    missing: dict[str, list[tuple[str, str]]], why: str, root: Path, command: str, from_dir: bool
) -> str:
    """One line for every missing file at once: how many, why, where the manifest (which
    file goes where) is written, and the command to run once they are in place."""

    manifest = data_dir() / MANIFEST_NAME
    manifest.parent.mkdir(parents=True, exist_ok=True)
    lines = ["dataset\tdownload\tput at"] + [
        f"{name}\t{url}\t{root / rel}" for name, files in missing.items() for url, rel in files
    ]
    write_file_atomically(manifest, "\n".join(lines) + "\n")
    again = f"`farm datasets fetch {command}" + (f" --from {root}`" if from_dir else "`")
    n_files = sum(len(files) for files in missing.values())
    if len(missing) == 1:
        ((name, files),) = missing.items()
        source = SOURCES[name]
        ups = [_upstream_path(url) for url, _ in files]
        what = (
            f"put {ups[0]} from {source.repository} at {root / files[0][1]}"
            if n_files == 1
            else f"put the {n_files} files under {os.path.commonpath(ups)}/ of "
            f"{source.repository} under {root / os.path.commonpath([r for _, r in files])}/"
        )
        return (
            f"{name}: {why}; {what} (list: {manifest}), then run {again} (or `farm "
            f"datasets import {source.format} --from {root / source.import_path}`)"
        )
    return (
        f"{len(missing)} datasets miss {n_files} files: {why}; {manifest} says which file "
        f"goes where under {root}; put them there, then run {again}"
    )
