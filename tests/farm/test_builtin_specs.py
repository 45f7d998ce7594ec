"""The built-in specs and baselines as package data (issue 43): a bare name reads the package's
file from any folder, a path is still a path, and a name that is none is one line naming the
closest built-in, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from optfarm.farm.cli import main
from optfarm.farm.cli.regress import DEFAULT_SPECS
from optfarm.farm.sweep.builtin_specs import builtin_names, is_builtin_name, resolve
from optfarm.farm.sweep.spec import SpecError, load_spec

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"


def test_every_shipped_file_is_a_builtin_and_the_defaults_name_them():
    assert builtin_names() == sorted(p.stem for p in SWEEPS.glob("*.yaml"))
    assert builtin_names(".json") == ["nightly-baseline", "nightly-peers-baseline"]
    assert set(DEFAULT_SPECS) <= set(builtin_names())


def test_a_bare_name_reads_the_package_file_from_another_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_spec("quickstart") == load_spec(SWEEPS / "quickstart.yaml")
    assert (
        resolve("nightly-baseline", ".json").read_text()
        == (SWEEPS / "nightly-baseline.json").read_text()
    )


def test_a_path_is_a_path_even_where_a_builtin_has_its_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "quickstart").write_text("name: mine\ndatasets: [synthetic]\n")
    assert resolve("quickstart") == Path("quickstart")
    with pytest.raises(SpecError, match=r"^quickstart\.yaml: no such sweep spec$"):
        load_spec("quickstart.yaml")  # a suffix makes it a path
    with pytest.raises(SpecError, match=r"^sweeps/quickstart\.yaml: no such sweep spec$"):
        load_spec("sweeps/quickstart.yaml")
    assert not is_builtin_name("./quickstart") and not is_builtin_name("")


def test_a_name_that_is_no_builtin_says_the_closest(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "quickstrt", "--serial"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "quickstrt: no such file, nor a built-in sweep spec (did you mean 'quickstart'?)" in err
    assert not (tmp_path / "sweeps-out").exists()


def test_regress_reads_a_builtin_baseline_and_never_writes_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["regress", "nightly-short", "--baseline", "nightly-basline"]) == 2
    assert "did you mean 'nightly-baseline'" in capsys.readouterr().err
    args = ["regress", "nightly-short", "--baseline", "nightly-baseline", "--update-baseline"]
    assert main(args) == 2
    assert "give a path" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
