"""The registry and `farm datasets list|show|import|fetch` on the real files."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from optfarm.farm.cli import main
from optfarm.oracle import registry
from optfarm.oracle.cloud_grid import GRIDS
from optfarm.oracle.dataset import Dataset, DatasetError
from optfarm.oracle.sources import SOURCES, download, fetch, sources_dir


def test_sources_cover_every_importable_name():
    scout = [n for n in SOURCES if n.startswith("scout-")]
    assert len(scout) == 18
    assert {
        "trimtuner-cnn",
        "trimtuner-rnn",
        "lynceus-cnn",
        "lynceus-multilayer",
        "lynceus-rnn",
        "cherrypick-kmeans",
        "cherrypick-spark",
        "cherrypick-terasort",
        "cherrypick-tpcds",
        "cherrypick-tpch",
        "guindani-kmeans",
        "guindani-query26",
        "guindani-query26-vm-ram",
    } | set(scout) == set(SOURCES)
    for source in SOURCES.values():
        assert source.repository.startswith("https://github.com/")
        assert all(url.startswith("https://raw.githubusercontent.com/") for url, _ in source.files)
    assert len(SOURCES["scout-join_bigdata_spark"].files) == 69


def test_fetch_all_from_a_local_copy_then_list_and_time_the_loads(
    shared_datasets, isolated_cache, capsys
):
    assert main(["datasets", "fetch", "all", "--from", str(shared_datasets)]) == 0
    out = capsys.readouterr().out
    assert out.count("fetched ") == len(SOURCES)
    assert sorted(p.stem for p in isolated_cache.glob("*.parquet")) == sorted(SOURCES)
    registry.load("synthetic")  # cached, so every dataset below loads from its Parquet file
    lines = ["load time from the canonical Parquet file (pytest -s shows it):"]
    for name in registry.available():
        t0 = time.perf_counter()
        d = registry.load(name)
        lines.append(f"  {name:<38} {time.perf_counter() - t0:.4f} s  ({d.table.num_rows} rows)")
    assert main(["datasets", "list", "--timing"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].split()[-2] == "load_s"
    named = [line.split()[0] for line in listing[2:] if not line.startswith(" ")]
    assert named == ["synthetic", *GRIDS] + sorted(SOURCES)
    assert max(map(len, listing)) <= 100
    with capsys.disabled():
        print("\n" + "\n".join(lines))


def test_fetch_from_an_upstream_layout(shared_datasets, tmp_path, isolated_cache):
    """--from also takes a copy laid out like the upstream repository."""
    upstream = tmp_path / "TrimTuner" / "tests" / "files"
    upstream.mkdir(parents=True)
    shutil.copy(shared_datasets / "trimtuner" / "rnn.csv", upstream / "rnn.csv")
    assert fetch(["trimtuner-rnn"], from_dir=tmp_path / "TrimTuner") == ["trimtuner-rnn"]
    assert Dataset.read(isolated_cache / "trimtuner-rnn.parquet").table.num_rows == 1440


def test_fetch_from_a_copy_keeps_its_files_where_the_tests_look(
    shared_datasets, tmp_path, isolated_cache, monkeypatch
):
    """The tests' skip line names `farm datasets fetch all --from DIR`: after it, the files
    are in the user cache's sources (``sources_dir``), found offline with nothing to download,
    so ``tests/conftest.py`` reads the real data from there."""
    monkeypatch.setenv("OPTFARM_OFFLINE", "1")
    names = ["trimtuner-rnn", "scout-join_bigdata_spark"]
    assert download(names, sources_dir()) == "offline: OPTFARM_OFFLINE is set"
    assert main(["datasets", "fetch", *names, "--from", str(shared_datasets)]) == 0
    assert download(names, sources_dir()) is None  # every file there
    kept = sources_dir() / SOURCES["trimtuner-rnn"].files[0][1]
    assert kept.read_bytes() == (shared_datasets / "trimtuner" / "rnn.csv").read_bytes()


def test_fetch_missing_files_says_what_to_put_where(tmp_path, isolated_cache):
    with pytest.raises(DatasetError) as e:
        fetch(["lynceus-rnn"], from_dir=tmp_path)
    msg = str(e.value)
    assert "\n" not in msg
    for part in (
        "files/t2_rnn.csv",
        "marialcasimiro/Lynceus-ICDCS",
        f"{tmp_path}/lynceus/t2_rnn.csv",
        "farm datasets fetch lynceus-rnn --from",
        "farm datasets import lynceus --from",
    ):
        assert part in msg
    assert not list(isolated_cache.glob("*.parquet"))


def test_offline_fetch_names_the_files_and_the_commands(monkeypatch, isolated_cache, capsys):
    monkeypatch.setenv("OPTFARM_OFFLINE", "1")
    assert main(["datasets", "fetch", "scout-lr_huge_spark"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "69 files" in err and "OPTFARM_OFFLINE" in err
    assert "data/scout/osr_multiple_nodes_original/lr_huge_spark" in err
    assert f"{isolated_cache}/sources/scout/lr_huge_spark" in err
    assert "farm datasets import scout" in err
    assert main(["datasets", "fetch", "no-such-data"]) == 2
    assert "unknown dataset 'no-such-data'" in capsys.readouterr().err
    assert not list(isolated_cache.glob("*.parquet"))


def test_offline_fetch_all_reports_every_missing_file_at_once(monkeypatch, isolated_cache, capsys):
    """One summary line, and a manifest with one row per file: what to download, where to
    put it (not 31 round trips, one dataset at a time)."""
    monkeypatch.setenv("OPTFARM_OFFLINE", "1")
    assert main(["datasets", "fetch", "all"]) == 2
    err = capsys.readouterr().err.strip()
    n_files = sum(len(s.files) for s in SOURCES.values())
    manifest = isolated_cache / "fetch-missing.tsv"
    assert "\n" not in err and len(err) < 300
    assert f"{len(SOURCES)} datasets miss {n_files} files" in err and str(manifest) in err
    rows = [line.split("\t") for line in manifest.read_text().splitlines()[1:]]
    assert len(rows) == n_files and {r[0] for r in rows} == set(SOURCES)
    assert [
        "lynceus-rnn",
        SOURCES["lynceus-rnn"].files[0][0],
        str(isolated_cache / "sources" / "lynceus" / "t2_rnn.csv"),
    ] in rows
    assert not list(isolated_cache.glob("*.parquet"))


def test_fetch_takes_the_files_placed_as_the_manifest_says(
    shared_datasets, monkeypatch, isolated_cache
):
    monkeypatch.setenv("OPTFARM_OFFLINE", "1")
    with pytest.raises(DatasetError):
        fetch(["guindani-kmeans"])
    for line in (isolated_cache / "fetch-missing.tsv").read_text().splitlines()[1:]:
        _, _, put_at = line.split("\t")
        Path(put_at).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shared_datasets / Path(put_at).relative_to(isolated_cache / "sources"), put_at)
    assert fetch(["guindani-kmeans"]) == ["guindani-kmeans"]
    assert not (isolated_cache / "fetch-missing.tsv").exists()  # done with: removed


def test_the_manifest_stays_while_it_lists_datasets_still_missing(
    shared_datasets, monkeypatch, isolated_cache
):
    monkeypatch.setenv("OPTFARM_OFFLINE", "1")
    with pytest.raises(DatasetError):
        fetch(["guindani-kmeans", "lynceus-rnn"])
    assert fetch(["guindani-kmeans"], from_dir=shared_datasets) == ["guindani-kmeans"]
    assert (isolated_cache / "fetch-missing.tsv").exists()  # lynceus-rnn is still missing


def test_an_unknown_dataset_gets_a_suggestion_on_one_short_line(capsys):
    assert main(["run", "--dataset", "lynceus-cn"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and len(err) < 200, err
    assert "did you mean 'lynceus-cnn'" in err and "farm datasets fetch lynceus-cnn" in err


def test_show_json_has_the_documented_fields(shared_datasets, capsys):
    path = shared_datasets / "guindani" / "query26_vm_ram.csv"
    assert main(["datasets", "import", "guindani", "--from", str(path)]) == 0
    capsys.readouterr()
    assert main(["datasets", "show", "guindani-query26-vm-ram", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {
        "name",
        "n_rows",
        "n_configs",
        "dimensions",
        "fidelities",
        "objective",
        "constraints",
        "n_feasible",
        "optimum",
    } <= set(info)
    assert (info["n_rows"], info["n_configs"], info["n_feasible"]) == (696, 41, 3)
    assert [d["name"] for d in info["dimensions"]] == ["n_vm", "ram"]
    assert info["fidelities"] == [1.0] and info["constraints"] == ["time<=205"]
    assert info["optimum"]["config"] == {"n_vm": 22, "ram": 0.7}
    assert info["optimum"]["cost"] == pytest.approx(4377259.33, rel=1e-8)


def test_import_with_a_name_and_an_unknown_option(shared_datasets, isolated_cache, capsys):
    path = shared_datasets / "cherrypick" / "CP_kmeans.csv"
    assert main(["datasets", "import", "cherrypick", "--from", str(path), "--name", "km"]) == 0
    assert registry.load("km").space().n_configs == 47
    assert (
        main(["datasets", "import", "cherrypick", "--from", str(path), "--description", "x.yaml"])
        == 2
    )
    assert "takes no option 'description'" in capsys.readouterr().err


def test_loading_an_unknown_name_says_how_to_get_it():
    with pytest.raises(DatasetError, match="farm datasets fetch trimtuner-cnn"):
        registry.load("trimtuner-cnn")
