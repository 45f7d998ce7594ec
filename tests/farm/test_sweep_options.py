"""``run_sweep``'s options: one ``SweepOptions`` value (frozen), its fields also taken as
keywords, which override it; an unknown option is refused before the folder is touched."""

from __future__ import annotations

import dataclasses

import pytest

from optfarm.farm.sweep.runner import SweepOptions, run_sweep
from optfarm.farm.sweep.spec import parse_spec


def _spec():
    return parse_spec(
        {
            "name": "options",
            "datasets": ["synthetic"],
            "optimizers": [{"name": "random", "params": {"n_init": [1, 3]}}],
            "seeds": 2,
            "limits": {"iterations": 10},
            "runtime": {"backend": "serial"},
        }
    )


def _results(report) -> dict[str, tuple]:
    return {
        key: (rec["status"], rec["summary"]["n_evaluations"], rec["summary"]["exploration_cost"])
        for key, rec in report.records.items()
    }


def test_an_options_value_and_keywords_run_the_same_sweep(tmp_path):
    by_value = run_sweep(_spec(), tmp_path / "value", SweepOptions(tracking=False, progress=False))
    by_keywords = run_sweep(_spec(), tmp_path / "keywords", tracking=False, progress=False)
    assert by_value.complete and by_keywords.complete and by_value.done == 4
    assert by_value.keys == by_keywords.keys
    assert _results(by_value) == _results(by_keywords)


def test_a_keyword_overrides_the_options_value_which_stays_as_it_was(tmp_path):
    options = SweepOptions(tracking=False, progress=False)
    report = run_sweep(_spec(), tmp_path / "out", options, run=False)
    assert report.done == 0 and report.records == {} and len(report.keys) == 4
    assert (tmp_path / "out" / "sweep.json").exists()  # recorded, nothing run
    assert options.run is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.run = False  # type: ignore[misc]
    assert run_sweep(_spec(), tmp_path / "out", options).done == 4


def test_an_unknown_option_is_refused_before_the_folder_is_touched(tmp_path):
    with pytest.raises(TypeError, match="colour"):
        run_sweep(_spec(), tmp_path / "out", tracking=False, colour="blue")
    assert not (tmp_path / "out").exists()
