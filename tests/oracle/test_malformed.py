"""Malformed inputs: each is rejected by `farm datasets import` with exit code 2, one line on
stderr naming the file, the column and the row, and nothing written to the cache.

Every bad file is built in tmp_path from a small hand-written table or a modified copy of a
real file read from the shared datasets folder at test time.
"""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pytest

from optfarm.farm.cli import main


def _rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text())))


def _write(path: Path, rows: list[list[str]], delimiter: str = ",") -> Path:
    buf = io.StringIO()
    csv.writer(buf, delimiter=delimiter, lineterminator="\n").writerows(rows)
    path.write_text(buf.getvalue())
    return path


def _edit(src: Path, dst: Path, column: str, row: int, value: str) -> Path:
    """Copy ``src`` to ``dst`` with data row ``row`` (1-based) of ``column`` set to ``value``."""
    rows = _rows(src)
    rows[row][rows[0].index(column)] = value
    return _write(dst, rows)


def _rename(src: Path, dst: Path, column: str, new: str) -> Path:
    rows = _rows(src)
    rows[0][rows[0].index(column)] = new
    return _write(dst, rows)


def _drop(src: Path, dst: Path, column: str) -> Path:
    rows = _rows(src)
    j = rows[0].index(column)
    return _write(dst, [r[:j] + r[j + 1 :] for r in rows])


SMALL_TABLE = [
    ["vm", "n", "runtime", "price"],
    ["a", "2", "100", "1.0"],
    ["a", "4", "60", "2.0"],
    ["b", "2", "80", "1.5"],
    ["b", "4", "50", "3.0"],
]
GOOD_YAML = """optfarm: table/1
name: mini
dimensions:
  - {name: vm, kind: categorical}
  - {name: n, kind: ordinal, log: true}
columns: {time: runtime}
price: {column: price}
constraints: ["time<=90"]
"""


def _csv_case(tmp: Path, yaml_text: str, table=SMALL_TABLE) -> tuple[Path, Path]:
    data = _write(tmp / "mini.csv", table)
    desc = tmp / "mini.yaml"
    desc.write_text(yaml_text)
    return data, desc


def _scout_copy(shared: Path, tmp: Path) -> Path:
    dst = tmp / "scout" / "join_huge_spark"
    shutil.copytree(shared / "scout" / "join_huge_spark", dst)
    return dst


def _case(name: str, shared: Path, tmp: Path):
    """(format, --from path, extra args, substrings the error line must contain)."""
    tt, ly = shared / "trimtuner" / "cnn.csv", shared / "lynceus" / "t2_rnn.csv"
    cp, gd = shared / "cherrypick" / "CP_tpch.csv", shared / "guindani" / "query26_vm_ram.csv"
    if name == "missing column":
        return "trimtuner", _drop(tt, tmp / "cnn.csv", "acc"), [], ["cnn.csv", "'acc'", "missing"]
    if name == "misspelt column":
        return (
            "trimtuner",
            _rename(tt, tmp / "cnn.csv", "training_time", "training_tme"),
            [],
            ["cnn.csv", "'training_time'", "training_tme"],
        )
    if name == "NaN accuracy":
        return (
            "trimtuner",
            _edit(tt, tmp / "cnn.csv", "acc", 7, "nan"),
            [],
            ["cnn.csv", "'acc'", "row 7", "line 8"],
        )
    if name == "negative time":
        return (
            "lynceus",
            _edit(ly, tmp / "t2_rnn.csv", "training_time", 12, "-3.5"),
            [],
            ["t2_rnn.csv", "'training_time'", "row 12", "negative"],
        )
    if name == "unknown flavour price":
        return (
            "lynceus",
            _edit(ly, tmp / "t2_rnn.csv", "vm_flavor", 3, "t2.nano"),
            [],
            ["t2_rnn.csv", "'vm_flavor'", "row 3", "t2.nano"],
        )
    if name == "accuracy above 1":
        return (
            "lynceus",
            _edit(ly, tmp / "t2_rnn.csv", "acc", 5, "1.5"),
            [],
            ["t2_rnn.csv", "'acc'", "row 5"],
        )
    if name == "empty file":
        (tmp / "CP_tpch.csv").write_text("")
        return "cherrypick", tmp / "CP_tpch.csv", [], ["CP_tpch.csv", "empty"]
    if name == "non-numeric time":
        return (
            "cherrypick",
            _edit(cp, tmp / "CP_tpch.csv", "time", 9, "fast"),
            [],
            ["CP_tpch.csv", "'time'", "row 9", "'fast'"],
        )
    if name == "inconsistent repeated rows (vm price)":
        return (
            "cherrypick",
            _edit(cp, tmp / "CP_tpch.csv", "vm_cost", 2, "0.9"),
            [],
            ["CP_tpch.csv", "'vm_cost'", "row 2"],
        )
    if name == "wrong delimiter":
        return (
            "guindani",
            _write(tmp / "query26_vm_ram.csv", _rows(gd), delimiter=";"),
            [],
            ["query26_vm_ram.csv", "line 1", "';'"],
        )
    if name == "ragged row":
        rows = _rows(gd)
        rows[20].append("7")
        return (
            "guindani",
            _write(tmp / "query26_vm_ram.csv", rows),
            [],
            ["query26_vm_ram.csv", "row 20", "line 21"],
        )
    if name == "positive -cost":
        return (
            "guindani",
            _edit(gd, tmp / "query26_vm_ram.csv", "-cost", 4, "6782883"),
            [],
            ["query26_vm_ram.csv", "'-cost'", "row 4", "negated"],
        )
    if name == "cost not time x #vm":
        return (
            "guindani",
            _edit(gd, tmp / "query26_vm_ram.csv", "-cost", 6, "-1000"),
            [],
            ["query26_vm_ram.csv", "'-cost'", "row 6"],
        )
    if name == "missing report.json field":
        wl = _scout_copy(shared, tmp)
        report = wl / "12_r4.large_join_spark_huge_1" / "report.json"
        report.write_text(report.read_text().replace('"elapsed_time"', '"elapsed"'))
        return (
            "scout",
            tmp / "scout",
            [],
            ["12_r4.large_join_spark_huge_1/report.json", "'elapsed_time'", "missing"],
        )
    if name == "unknown vm type in scout dir":
        wl = _scout_copy(shared, tmp)
        (wl / "8_m4.large_join_spark_huge_1").rename(wl / "8_x9.large_join_spark_huge_1")
        return "scout", tmp / "scout", [], ["8_x9.large_join_spark_huge_1", "'vm_type'", "x9.large"]
    if name == "duplicate dimension":
        data, desc = _csv_case(
            tmp,
            GOOD_YAML.replace(
                "{name: n, kind: ordinal, log: true}", "{name: vm, kind: categorical}"
            ),
        )
        return "csv", data, [], ["mini.yaml", "'dimensions'", "'vm'", "twice"]
    if name == "bad YAML description":
        data, desc = _csv_case(
            tmp, GOOD_YAML.replace("columns: {time: runtime}", "columns: {time: runtime")
        )
        return "csv", data, [], ["mini.yaml", "YAML", "line"]
    if name == "unknown dimension kind":
        data, desc = _csv_case(tmp, GOOD_YAML.replace("kind: categorical", "kind: nominal"))
        return "csv", data, [], ["mini.yaml", "'dimensions.0.kind'", "categorical"]
    if name == "misspelt YAML key":
        data, desc = _csv_case(tmp, GOOD_YAML.replace("columns:", "colums:"))
        return "csv", data, [], ["mini.yaml", "'colums'"]
    if name == "inconsistent repeated rows (price column)":
        table = SMALL_TABLE + [["a", "2", "104", "1.2"]]
        data, desc = _csv_case(tmp, GOOD_YAML, table)
        return "csv", data, [], ["mini.csv", "'price'", "row 5", "different price"]
    if name == "formula names an unknown column":
        data, desc = _csv_case(
            tmp, GOOD_YAML.replace("price: {column: price}", "price: {formula: 'n * cpu_price'}")
        )
        return "csv", data, [], ["mini.yaml", "'price.formula'", "'cpu_price'"]
    if name == "csv dimension column missing":
        data, desc = _csv_case(tmp, GOOD_YAML.replace("{name: vm,", "{name: vm_type,"))
        return "csv", data, ["--description", str(desc)], ["mini.csv", "'vm_type'", "missing"]
    if name == "overflowing time x price":
        table = SMALL_TABLE[:2] + [["a", "4", "1e200", "1e200"]] + SMALL_TABLE[3:]
        data, desc = _csv_case(tmp, GOOD_YAML, table)
        return "csv", data, [], ["mini.csv", "'runtime'", "row 2 (line 3)", "longer than a year"]
    if name == "a run longer than a year":
        return (
            "lynceus",
            _edit(ly, tmp / "t2_rnn.csv", "training_time", 4, "1e308"),
            [],
            ["t2_rnn.csv", "'training_time'", "row 4 (line 5)", "longer than a year"],
        )
    if name == "a price above the cap":
        table = [SMALL_TABLE[0], ["a", "2", "100", "1e12"]] + SMALL_TABLE[2:]
        data, desc = _csv_case(tmp, GOOD_YAML, table)
        return "csv", data, [], ["mini.csv", "'price'", "row 1 (line 2)", "above the cap"]
    if name == "a path in the YAML name":
        data, desc = _csv_case(tmp, GOOD_YAML.replace("name: mini", "name: ../escape"))
        return "csv", data, [], ["mini.yaml", "'name'"]
    if name == "a path in --name":
        return (
            "cherrypick",
            cp,
            ["--name", "../escape"],
            ["--name", "'../escape'", "path separators"],
        )
    if name == "an absolute --name":
        return ("cherrypick", cp, ["--name", str(tmp / "abs")], ["--name", "not a dataset name"])
    raise AssertionError(name)


CASES = [
    "missing column",
    "misspelt column",
    "NaN accuracy",
    "negative time",
    "unknown flavour price",
    "accuracy above 1",
    "empty file",
    "non-numeric time",
    "inconsistent repeated rows (vm price)",
    "wrong delimiter",
    "ragged row",
    "positive -cost",
    "cost not time x #vm",
    "missing report.json field",
    "unknown vm type in scout dir",
    "duplicate dimension",
    "bad YAML description",
    "unknown dimension kind",
    "misspelt YAML key",
    "inconsistent repeated rows (price column)",
    "formula names an unknown column",
    "csv dimension column missing",
    "overflowing time x price",
    "a run longer than a year",
    "a price above the cap",
    "a path in the YAML name",
    "a path in --name",
    "an absolute --name",
]


@pytest.mark.parametrize("case", CASES)
def test_malformed_input_is_rejected_with_one_line(
    case, shared_datasets, tmp_path, isolated_cache, capsys
):
    work = tmp_path / "input"
    work.mkdir()
    fmt, path, extra, expected = _case(case, shared_datasets, work)
    code = main(["datasets", "import", fmt, "--from", str(path), *extra])
    captured = capsys.readouterr()
    assert code == 2
    err = captured.err.strip()
    assert err.startswith("farm: error: ") and "\n" not in err, err
    for part in expected:
        assert part in err, f"{part!r} not in {err!r}"
    assert list(isolated_cache.iterdir()) == []
    assert not (tmp_path / "escape.parquet").exists() and not (tmp_path / "abs.parquet").exists()


def test_the_unmodified_inputs_import(shared_datasets, tmp_path, isolated_cache, capsys):
    """The sources of the malformed cases are themselves accepted (so the cases test the
    modification, not the source)."""
    data, _ = _csv_case(tmp_path, GOOD_YAML)
    assert main(["datasets", "import", "csv", "--from", str(data)]) == 0
    assert (
        main(["datasets", "import", "scout", "--from", str(_scout_copy(shared_datasets, tmp_path))])
        == 0
    )
    for fmt, rel in (
        ("trimtuner", "trimtuner/cnn.csv"),
        ("lynceus", "lynceus/t2_rnn.csv"),
        ("cherrypick", "cherrypick/CP_tpch.csv"),
        ("guindani", "guindani/query26_vm_ram.csv"),
    ):
        assert main(["datasets", "import", fmt, "--from", str(shared_datasets / rel)]) == 0
    names = sorted(p.stem for p in isolated_cache.iterdir())
    assert names == [
        "cherrypick-tpch",
        "guindani-query26-vm-ram",
        "lynceus-rnn",
        "mini",
        "scout-join_huge_spark",
        "trimtuner-cnn",
    ]


def test_a_bad_file_in_a_folder_rejects_the_whole_import(
    shared_datasets, tmp_path, isolated_cache, capsys
):
    """Every dataset is validated before any is written: one bad file, nothing imported."""
    folder = tmp_path / "cherrypick"
    shutil.copytree(shared_datasets / "cherrypick", folder)
    _edit(shared_datasets / "cherrypick" / "CP_tpch.csv", folder / "CP_tpch.csv", "time", 3, "")
    assert main(["datasets", "import", "cherrypick", "--from", str(folder)]) == 2
    assert "CP_tpch.csv: column 'time', row 3 (line 4): missing value" in capsys.readouterr().err
    assert list(isolated_cache.iterdir()) == []


def test_an_import_never_replaces_a_cached_dataset_silently(
    shared_datasets, tmp_path, isolated_cache, capsys
):
    """A different content under a cached name needs --force, and the message says what
    would change; the same content imports again quietly."""
    full = shared_datasets / "lynceus" / "t2_rnn.csv"
    assert main(["datasets", "import", "lynceus", "--from", str(full)]) == 0
    cached = (isolated_cache / "lynceus-rnn.parquet").read_bytes()
    assert main(["datasets", "import", "lynceus", "--from", str(full)]) == 0
    small = _write(tmp_path / "t2_rnn.csv", _rows(full)[:21])
    capsys.readouterr()
    assert main(["datasets", "import", "lynceus", "--from", str(small)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'lynceus-rnn'" in err and "--force" in err, err
    assert "384 -> 20 rows" in err and "T_max 61.84 -> " in err, err
    assert (isolated_cache / "lynceus-rnn.parquet").read_bytes() == cached
    assert main(["datasets", "import", "lynceus", "--from", str(small), "--force"]) == 0
    from optfarm.oracle import registry

    assert registry.load("lynceus-rnn").table.num_rows == 20
