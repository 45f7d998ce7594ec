"""Sweep specs (validation, expansion, run keys), the results store and the sweep CLI, without
Ray (``--serial``): malformed specs, resume, failed runs and exit codes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from optfarm.farm.cli import main
from optfarm.farm.run.loop import run_one
from optfarm.farm.run.spec import RunSpec
from optfarm.farm.store.store import Store, spec_from_dict
from optfarm.farm.sweep.board_spec import parse_board_spec
from optfarm.farm.sweep.spec import SpecError, expand, load_spec, parse_spec, read_yaml
from optfarm.optimizers.base import Suggestion
from optfarm.optimizers.random_search import RandomSearch

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"
GOOD = {
    "name": "t",
    "datasets": ["synthetic"],
    "optimizers": ["random"],
    "seeds": 2,
    "limits": {"iterations": 5},
}

# (spec, the key the one-line error must name)
MALFORMED = [
    ({**GOOD, "datsets": ["synthetic"]}, "datsets: unknown key"),
    ({k: v for k, v in GOOD.items() if k != "optimizers"}, "optimizers: required key"),
    ({**GOOD, "datasets": []}, "datasets:"),
    ({**GOOD, "optimizers": [{"nme": "random"}]}, "optimizers[0].nme: unknown key"),
    (
        {**GOOD, "optimizers": [{"name": "random", "params": {"n_init": []}}]},
        "optimizers[0].params:",
    ),
    (
        {**GOOD, "optimizers": [{"name": "random", "params": {"n_init": {"a": 1}}}]},
        "optimizers[0].params.n_init:",
    ),
    ({**GOOD, "seeds": 0}, "seeds:"),
    ({**GOOD, "seeds": {"start": 3}}, "seeds.count: required key"),
    ({**GOOD, "seeds": [1, 1]}, "seeds:"),
    ({**GOOD, "limits": {"iterations": 0}}, "limits.iterations:"),
    ({**GOOD, "limits": {"budjet": 3}}, "limits.budjet: unknown key"),
    ({**GOOD, "limits": {"until": "cno<1"}}, "limits.until:"),
    ({**GOOD, "problem": {"constraints": ["time<<300"]}}, "problem.constraints:"),
    ({**GOOD, "problem": {"objective": "maximise cost"}}, "problem.objective:"),
    (
        {**GOOD, "datasets": [{"name": "synthetic", "limits": {"budget": -1}}]},
        "datasets[0].limits.budget:",
    ),
    ({**GOOD, "runtime": {"executor": "dask"}}, "runtime.executor:"),
    ({**GOOD, "tracking": {"enabled": "maybe"}}, "tracking.enabled:"),
    ({**GOOD, "aggregate": "median"}, "aggregate:"),
    ({**GOOD, "optimizers": ["no-such-optimizer"]}, "optimizers[0].name: unknown optimizer"),
    (
        {**GOOD, "optimizers": [{"name": "random", "params": {"bogus": 1}}]},
        "optimizers[0].params: random: unknown parameter 'bogus'",
    ),
    (
        {**GOOD, "optimizers": [{"name": "random", "params": {"n_init": -2}}]},
        "optimizers[0].params: random: parameter 'n_init'",
    ),
    ({**GOOD, "datasets": ["no-such-dataset"]}, "'no-such-dataset'"),
    (["not", "a", "mapping"], "a sweep spec is a mapping"),
    ({**GOOD, "seeds": True}, "seeds:"),
    ({**GOOD, "seeds": [0, 1.5]}, "seeds"),
    ({**GOOD, "seeds": {"start": False, "count": 2}}, "seeds.start:"),
    ({**GOOD, "name": "../../x"}, "name: '../../x' is not a sweep name"),
    ({**GOOD, "name": "/tmp/abs"}, "name: '/tmp/abs' is not a sweep name"),
    (
        {
            **GOOD,
            "optimizers": [{"name": "random", "params": {"n_init": list(range(1, 101))}}],
            "seeds": {"start": 0, "count": 10**7},
        },
        "expands to 1,000,000,000 runs, more than the limit of 200,000",
    ),
]


@pytest.mark.parametrize("spec,key", MALFORMED, ids=[k for _, k in MALFORMED])
def test_malformed_spec_is_one_line_naming_the_key(spec, key, tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(spec))
    code = main(
        [
            "sweep",
            str(path),
            "--out",
            str(tmp_path / "out"),
            "--serial",
            "--no-tracking",
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert key in err, err
    assert not (tmp_path / "out" / "runs").exists()  # nothing ran


def test_invalid_yaml_names_the_line(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\ndatasets: [synthetic\noptimizers: [random]\n")
    assert main(["sweep", str(path), "--serial", "--no-tracking"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not valid YAML (line" in err


def test_a_key_given_twice_in_yaml_is_refused_naming_it(tmp_path, capsys):
    path = tmp_path / "twice.yaml"
    path.write_text(
        "name: x\ndatasets: [synthetic]\noptimizers: [random]\nseeds: 2\n"
        "limits: {iterations: 5}\nseeds: 3\n"
    )
    assert (
        main(["sweep", str(path), "--serial", "--no-tracking", "--out", str(tmp_path / "out")]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "key 'seeds' is given twice" in err, err
    assert "(line 6)" in err, err
    assert not (tmp_path / "out").exists()


def test_the_run_limit_is_counted_before_expansion_and_can_be_lifted(tmp_path, capsys):
    huge = parse_spec({**GOOD, "seeds": {"start": 0, "count": 10**9}})
    with pytest.raises(SpecError, match="1,000,000,000 runs"):
        expand(huge)  # counted: enumerating 10^9 runs would not end
    assert _sweep(tmp_path, "--max-runs", "3", seeds=4) == 2
    assert "--max-runs 4" in capsys.readouterr().err
    assert _sweep(tmp_path, "--max-runs", "4", seeds=4) == 0


def test_expansion_is_the_grid_with_stable_deduplicated_keys():
    spec = parse_spec(
        {
            "name": "grid",
            "datasets": [
                "synthetic",
                {"name": "synthetic", "problem": {"constraints": ["time<=900"]}},
            ],
            "optimizers": [{"name": "random", "params": {"n_init": [1, 2, 2]}}],
            "seeds": {"start": 5, "count": 3},
            "limits": {"iterations": 7, "budget": 40},
        }
    )
    runs = expand(spec)
    assert len(runs) == 2 * 2 * 3  # the repeated grid value is one run
    assert len({r.run_key for r in runs}) == len(runs)
    assert {r.seed for r in runs} == {5, 6, 7}
    assert {r.constraints for r in runs} == {None, ("time<=900",)}
    first = runs[0]
    assert (
        first.run_key
        == RunSpec(
            dataset="synthetic",
            optimizer="random",
            seed=5,
            params={"n_init": 1},
            budget=40,
            iterations=7,
        ).run_key
    )
    assert [r.run_key for r in expand(spec)] == [r.run_key for r in runs]  # stable


def test_dataset_overrides_merge_key_by_key():
    spec = parse_spec(
        {
            **GOOD,
            "datasets": [{"name": "synthetic", "limits": {"budget": 9}}],
            "limits": {"iterations": 5, "budget": 50, "until": "cno<=1.1"},
            "problem": {"objective": "min cost", "constraints": ["time<=900"]},
        }
    )
    [first, _] = expand(spec)
    assert (first.iterations, first.budget, first.until) == (5, 9.0, "cno<=1.1")
    assert (first.objective, first.constraints) == ("min cost", ("time<=900",))


def test_shipped_specs_validate():
    from optfarm.optimizers.registry import available
    from tests.optimizers.extras import missing_extra

    paths = sorted(SWEEPS.glob("*.yaml"))
    names = {p.stem for p in paths}
    assert {
        "quickstart",
        "lynceus-tf",
        "lynceus-sensitivity",
        "trimtuner-filters",
        "guindani-variants",
        "nightly",
        "lynceus-timeouts",
        "lynceus-scout-cherrypick",
        "obol",
        "nephele",
        "trimtuner-comparison",
        "peers-lynceus-tf",
        "peers-scout-cherrypick",
        "peers-trimtuner",
        "peers-guindani",
    } <= names
    for path in paths:
        data = read_yaml(path)  # a leaderboard spec is a sweep spec with a board section
        spec = parse_board_spec(data, str(path))[0] if "board" in data else load_spec(path)
        if all(
            o.name in available() and not missing_extra(o.name) for o in spec.optimizer_entries()
        ):
            assert expand(spec), path  # names and parameters known to the registry
    tf = load_spec(SWEEPS / "lynceus-tf.yaml")
    assert len(tf.seed_list()) == 100
    assert {o.name for o in tf.optimizer_entries()} == {"lynceus", "eic-usd", "random"}


def _sweep(tmp_path, *extra, seeds=4, optimizers="random"):
    return main(
        [
            "sweep",
            "--datasets",
            "synthetic",
            "--optimizers",
            optimizers,
            "--seeds",
            str(seeds),
            "--iterations",
            "6",
            "--out",
            str(tmp_path / "out"),
            "--serial",
            "--no-tracking",
            "--no-progress",
            *extra,
        ]
    )


def test_serial_sweep_stores_traces_atomically_and_resumes(tmp_path, capsys):
    assert _sweep(tmp_path, seeds=3) == 0
    store = Store(tmp_path / "out")
    first = {r["run_key"]: r["finished_at"] for r in store.records()}
    assert len(first) == 3
    assert not list((tmp_path / "out").rglob("*.tmp"))  # atomic writes leave no temp files
    for key in first:
        spec = store.record(key)["spec"]
        expected = run_one(spec_from_dict(spec)).trace
        got = store.trace(key)
        assert got.column("config_id").to_pylist() == expected.column("config_id").to_pylist()
    capsys.readouterr()
    assert _sweep(tmp_path, seeds=5) == 0  # two more seeds: only those run
    out = capsys.readouterr().out
    assert "5 runs, 3 already done, 2 run now, 0 failed" in out
    records = list(store.records())
    assert len(records) == 5
    assert all(first[r["run_key"]] == r["finished_at"] for r in records if r["run_key"] in first)
    index = pq.read_table(tmp_path / "out" / "index.parquet")
    assert sorted(index.column("seed").to_pylist()) == [0, 1, 2, 3, 4]
    assert set(index.column("status").to_pylist()) == {"done"}
    assert "final_p50" in out and "synthetic" in out  # the summary table


class FailingSearch(RandomSearch):
    """Random search that breaks at its third step on odd seeds while a flag file exists
    (a plugin optimizer, registered under the name 'failing' by the test)."""

    name = "failing"
    flag: Path | None = None

    def suggest(self) -> Suggestion | None:
        if self.seed % 2 and len(self.history) == 2 and self.flag and self.flag.exists():
            raise FloatingPointError("surrogate diverged")
        return super().suggest()


def test_failed_runs_are_recorded_exit_1_and_retried_next_time(tmp_path, monkeypatch, capsys):
    from optfarm.optimizers import registry

    monkeypatch.setitem(
        sys.modules, "optfarm.optimizers.failing_test_plugin", sys.modules[__name__]
    )
    monkeypatch.setitem(registry.OPTIMIZERS, "failing", "failing_test_plugin:FailingSearch")
    flag = tmp_path / "break"
    flag.touch()
    monkeypatch.setattr(FailingSearch, "flag", flag)
    assert _sweep(tmp_path, seeds=4, optimizers="failing") == 1
    err = capsys.readouterr().err
    assert "FloatingPointError: surrogate diverged" in err
    index = pq.read_table(tmp_path / "out" / "index.parquet").to_pylist()
    failed = {r["seed"] for r in index if r["status"] == "failed"}
    assert failed == {1, 3}
    assert all("surrogate diverged" in r["error"] for r in index if r["status"] == "failed")
    flag.unlink()
    assert _sweep(tmp_path, seeds=4, optimizers="failing") == 0
    assert "4 runs, 2 already done, 2 run now, 0 failed" in capsys.readouterr().out
    index = pq.read_table(tmp_path / "out" / "index.parquet").to_pylist()
    assert len(index) == 4 and {r["status"] for r in index} == {"done"}
    assert np.all([r["n_evaluations"] == 6 for r in index])


def test_sync_of_a_folder_that_is_not_a_sweep_is_bad_input(tmp_path, capsys):
    assert main(["sync", str(tmp_path)]) == 2
    assert "not a sweep output folder" in capsys.readouterr().err


def test_spec_error_is_a_value_error_with_the_source():
    with pytest.raises(SpecError, match=r"^x\.yaml: seeds:"):
        parse_spec({**GOOD, "seeds": -1}, "x.yaml")
    assert json.loads(json.dumps(parse_spec(GOOD).model_dump(mode="json")))["name"] == "t"


def test_inline_sweep_takes_optimizer_parameters(tmp_path, capsys):
    assert _sweep(tmp_path, "--param", "random.n_init=3", seeds=2) == 0
    index = pq.read_table(tmp_path / "out" / "index.parquet").to_pylist()
    assert [json.loads(r["params"]) for r in index] == [{"n_init": 3}] * 2
    assert _sweep(tmp_path, "--param", "eic.n_init=3") == 2
    assert "optimizer 'eic' is not in --optimizers" in capsys.readouterr().err


def test_a_held_folder_is_refused_and_a_stale_lock_is_not(tmp_path, capsys):
    """The lock file of a driver that died (its pid written, no flock held) does not block;
    a live holder does, named on one line."""
    from optfarm.farm.store.locks import FolderLock

    out = tmp_path / "out"
    out.mkdir()
    (out / "lock").write_text(json.dumps({"pid": 2**22 + 7, "host": "elsewhere"}))
    assert _sweep(tmp_path, seeds=1) == 0
    with FolderLock(out):
        assert _sweep(tmp_path, seeds=2) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "in use by another sweep" in err, err
        import os

        assert f"pid {os.getpid()}" in err
        assert main(["sync", str(out)]) == 2
    assert _sweep(tmp_path, seeds=2) == 0  # released with the holder


def test_damaged_records_and_traces_are_quarantined_and_redone(tmp_path, capsys):
    assert _sweep(tmp_path, seeds=3) == 0
    store = Store(tmp_path / "out")
    a, b, c = sorted(store.finished())
    store.record_path(a).write_text("{")
    data = bytearray(store.trace_path(b).read_bytes())
    data[-100] ^= 0x10
    store.trace_path(b).write_bytes(bytes(data))
    store.trace_path(c).unlink()
    capsys.readouterr()
    assert main(["report", str(tmp_path / "out"), "--no-tracking"]) == 2
    assert str(store.runs) in capsys.readouterr().err
    assert _sweep(tmp_path, seeds=3) == 0
    captured = capsys.readouterr()
    assert "3 runs, 0 already done, 3 run now" in captured.out
    lines = [line for line in captured.err.splitlines() if "quarantine" in line]
    assert len(lines) == 3
    assert f"{a}.json: not valid JSON" in lines[0] and "trace missing" in lines[2]
    assert store.scan().damaged == [] and len(store.scan().records) == 3
    record = store.record(a)
    record["summary"]["exploration_cost"] += 1.0  # a changed value: the sha256 says so
    store.record_path(a).write_text(json.dumps(record))
    assert "does not match its sha256" in str(store.scan().damaged[0])


def test_a_resume_hashes_only_files_changed_since_they_were_verified(tmp_path, capsys):
    """verified.json keeps each file's signature as written; a byte changed behind the
    store's back is found even with the file's size and modification time put back (its
    change time moves), and only --verify finds damage whose signature was kept."""
    assert _sweep(tmp_path, seeds=3) == 0
    out = tmp_path / "out"
    store = Store(out)
    a, b, c = sorted(store.finished())
    kept = json.loads((out / "verified.json").read_text())["files"]
    assert kept[a] == [store.signature(store.record_path(a)), store.signature(store.trace_path(a))]
    index_written = (out / "index.parquet").stat().st_mtime_ns
    capsys.readouterr()
    assert _sweep(tmp_path, seeds=3) == 0  # nothing run: nothing rewritten
    assert "3 already done, 0 run now" in capsys.readouterr().out
    assert (out / "index.parquet").stat().st_mtime_ns == index_written
    for key, forge in ((a, False), (b, True)):
        trace = store.trace_path(key)
        st = trace.stat()
        data = bytearray(trace.read_bytes())
        data[len(data) // 2] ^= 0x04
        with open(trace, "r+b") as f:  # same size, same inode, modification time set back
            f.write(bytes(data))
        os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns))
        if forge:  # what a disk's bit rot would look like: the signature as kept
            kept[key][1] = store.signature(trace)
    (out / "verified.json").write_text(json.dumps({"version": 1, "files": kept}))
    assert _sweep(tmp_path, seeds=3) == 0
    captured = capsys.readouterr()
    assert "2 already done, 1 run now" in captured.out
    assert f"{a}.parquet: trace content does not match its sha256" in captured.err
    assert (out / "index.parquet").stat().st_mtime_ns != index_written
    assert _sweep(tmp_path, "--verify", seeds=3) == 0
    captured = capsys.readouterr()
    assert "2 already done, 1 run now" in captured.out
    assert f"{b}.parquet: trace content does not match its sha256" in captured.err
    (out / "verified.json").write_text("{")  # damaged: ignored, everything hashed, rewritten
    assert _sweep(tmp_path, seeds=3) == 0
    assert "3 already done" in capsys.readouterr().out
    assert set(json.loads((out / "verified.json").read_text())["files"]) == {a, b, c}


def test_a_truncated_sweep_json_is_one_line_naming_it(tmp_path, capsys):
    assert _sweep(tmp_path, seeds=1) == 0
    spec = tmp_path / "out" / "sweep.json"
    spec.write_text(spec.read_text()[:40])
    capsys.readouterr()
    for command in (
        lambda: _sweep(tmp_path, seeds=1),
        lambda: main(["sync", str(spec.parent)]),
        lambda: main(["report", str(spec.parent)]),
    ):
        assert command() == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"farm: error: {spec}: not valid JSON") and "\n" not in err, err
