"""Where every importable public dataset comes from, and ``farm datasets fetch``.

``SOURCES[name] = Source(format, repository, files)``, ``files`` a list of
``(raw download URL, relative path)``; the relative path is the file's place in a local copy
laid out like the shared datasets folder (``trimtuner/cnn.csv``, ``scout/<workload>/...``).

``fetch(names)`` downloads a dataset's files into a temporary folder (urllib, short timeout)
and imports them; ``fetch(names, from_dir=DIR)`` takes them from a local copy laid out either
like the shared folder (``DIR/trimtuner/cnn.csv``) or like the upstream repository
(``DIR/tests/files/cnn.csv``), or from ``DIR`` itself holding the files. Offline (or with
``OPTFARM_OFFLINE=1``) it raises a one-line DatasetError saying which files to put where.
Every dataset is validated before any is written, so a failed fetch leaves the cache as it was.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from .cache import data_dir
from .dataset import Dataset, DatasetError

__all__ = ["SOURCES", "TIMEOUT_S", "Source", "fetch"]

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
    "join_bigdata_spark": "join_spark_bigdata", "join_huge_spark": "join_spark_huge",
    "kmeans_bigdata_spark15": "kmeans_spark1.5_bigdata",
    "kmeans_huge_spark15": "kmeans_spark1.5_huge",
    "lr_bigdata_spark": "lr_spark_bigdata", "lr_huge_spark": "lr_spark_huge",
    "naive-bayes_bigdata_spark15": "naive-bayes_spark1.5_bigdata",
    "naive-bayes_huge_spark15": "naive-bayes_spark1.5_huge",
    "pagerank_bigdata_hadoop": "pagerank_hadoop_bigdata",
    "pagerank_bigdata_spark": "pagerank_spark_bigdata",
    "pagerank_huge_hadoop": "pagerank_hadoop_huge", "pagerank_huge_spark": "pagerank_spark_huge",
    "regression_bigdata_spark15": "regression_spark1.5_bigdata",
    "regression_huge_spark15": "regression_spark1.5_huge",
    "terasort_bigdata_hadoop": "terasort_hadoop_bigdata",
    "terasort_huge_hadoop": "terasort_hadoop_huge",
    "wordcount-large_bigdata_hadoop": "wordcount_hadoop_bigdata",
    "wordcount-large_huge_hadoop": "wordcount_hadoop_huge",
}
# The 69 Scout cluster configurations: cluster sizes per instance size, for c4, m4 and r4.
SCOUT_SIZES = {"large": (4, 6, 8, 10, 12, 16, 24, 32, 40, 48),
               "xlarge": (4, 6, 8, 10, 12, 16, 20, 24), "2xlarge": (4, 6, 8, 10, 12)}


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
        out[f"trimtuner-{net}"] = Source("trimtuner", _github(TRIMTUNER), [
            (_raw(TRIMTUNER, f"tests/files/{net}.csv"), f"trimtuner/{net}.csv")])
    for net, stem in (("cnn", "t2_cnn_intermediate_values"),
                      ("multilayer", "t2_multilayer_intermediate_values"), ("rnn", "t2_rnn")):
        out[f"lynceus-{net}"] = Source("lynceus", _github(LYNCEUS), [
            (_raw(LYNCEUS, f"files/{stem}.csv"), f"lynceus/{stem}.csv")])
    for job in ("kmeans", "spark", "terasort", "tpcds", "tpch"):
        out[f"cherrypick-{job}"] = Source("cherrypick", _github(LYNCEUS), [
            (_raw(LYNCEUS, f"data/cherrypick/CP_{job}.csv"), f"cherrypick/CP_{job}.csv")])
    for workload in SCOUT_WORKLOADS:
        out[f"scout-{workload}"] = Source("scout", _github(LYNCEUS), _scout_files(workload))
    for name, stem in (("guindani-kmeans", "kmeans_monodimensional"),
                       ("guindani-query26", "query26_monodimensional"),
                       ("guindani-query26-vm-ram", "query26_vm_ram")):
        out[name] = Source("guindani", _github(MALIBOO), [
            (_raw(MALIBOO, f"resources/{stem}.csv"), f"guindani/{stem}.csv")])
    return out


SOURCES: dict[str, Source] = _sources()


def fetch(names: Sequence[str], from_dir: str | Path | None = None) -> list[str]:
    """Import the public datasets ``names`` (``"all"``: every name in SOURCES) into the cache,
    from ``from_dir`` or by downloading; return the names imported."""
    from .formats import FORMATS

    wanted = list(SOURCES) if "all" in names else list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in SOURCES]
    if unknown:
        raise DatasetError(f"unknown dataset {unknown[0]!r} (fetchable: all, "
                           f"{', '.join(SOURCES)})")
    datasets: list[Dataset] = []
    with tempfile.TemporaryDirectory(prefix="optfarm-fetch-") as tmp:
        for name in wanted:
            source = SOURCES[name]
            if from_dir is not None:
                _copy_local(name, source, Path(from_dir), Path(tmp))
            else:
                _download(name, source, Path(tmp))
            loaded = FORMATS[source.format](Path(tmp) / source.import_path, name=name)
            datasets.extend(loaded)
    for d in datasets:
        d.write(data_dir() / f"{d.name}.parquet")
    return [d.name for d in datasets]


def _upstream_path(url: str) -> str:
    return url.split("/HEAD/", 1)[1]


def _copy_local(name: str, source: Source, root: Path, tmp: Path) -> None:
    if not root.is_dir():
        raise DatasetError(f"{root}: no such folder (--from takes a local copy of the data)")
    missing = []
    for url, rel in source.files:
        candidates = (root / rel, root / _upstream_path(url),
                      root / Path(rel).relative_to(Path(rel).parts[0]))
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            missing.append((url, rel))
            continue
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(found, target)
    if missing:
        raise DatasetError(_where_to_put(name, source, missing, f"not found under {root}",
                                         root))


def _download(name: str, source: Source, tmp: Path) -> None:
    if os.environ.get("OPTFARM_OFFLINE"):
        raise DatasetError(_where_to_put(name, source, source.files, "offline (OPTFARM_OFFLINE)"))
    for url, rel in source.files:
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
                target.write_bytes(response.read())
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", e)
            raise DatasetError(_where_to_put(name, source, source.files,
                                             f"cannot download {url} ({reason})")) from None


def _where_to_put(name: str, source: Source, files: list[tuple[str, str]], why: str,
                  root: Path | None = None) -> str:
    """One line: which files are needed, where to put them, and the commands to run."""
    root_text = str(root) if root is not None else "DIR"
    rels = [rel for _, rel in files]
    ups = [_upstream_path(url) for url, _ in files]
    if len(files) == 1:
        what = f"put {ups[0]} from {source.repository} at {root_text}/{rels[0]}"
    else:
        what = (f"put the {len(files)} files under {os.path.commonpath(ups)}/ of "
                f"{source.repository} under {root_text}/{os.path.commonpath(rels)}/ "
                f"(first: {rels[0]})")
    return (f"{name}: {why}; {what}, then run `farm datasets fetch {name} --from "
            f"{root_text}` (or `farm datasets import {source.format} --from "
            f"{root_text}/{source.import_path}`)")
