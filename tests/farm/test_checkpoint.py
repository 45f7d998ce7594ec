"""A run stopped mid-way resumes from its checkpoint and ends as the uninterrupted run would
have (``optfarm.farm.run.checkpoint``): in-process for each kind of optimizer, and through a
serial sweep whose process is killed (SIGKILL) in the middle of a run and started again."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time

import pytest

from optfarm.farm.cli import main
from optfarm.farm.run.checkpoint import Checkpoint, written_by
from optfarm.farm.run.loop import run_one
from optfarm.farm.run.spec import RunSpec
from optfarm.farm.store.store import Store

# what a run measures and decides (the timing columns differ between any two runs)
SAME = (
    "config_id",
    "fidelity",
    "phase",
    "cost",
    "time",
    "timed_out",
    "cum_exploration_cost",
    "incumbent_config_id",
    "pick_config_id",
)


class Stop(Exception):
    """The process ending mid-run, as the loop meets it."""


def _stop_at(step: int):
    def on_step(row: dict) -> None:
        if row["step"] == step:
            raise Stop

    return on_step


def _columns(trace) -> dict:
    return {c: trace.column(c).to_pylist() for c in SAME}


@pytest.mark.parametrize(
    "optimizer, iterations",
    [
        ("random", 16),
        ("lynceus", 16),  # numba kernels, trees, look-ahead state
        ("obol", 16),
        ("eic", 14),  # an emcee GP: its walkers' generator
        ("trimtuner", 9),  # entropy search, sub-sampling
        ("optuna-tpe", 16),  # an Optuna study and its sampler
    ],
)
def test_a_resumed_run_ends_as_the_uninterrupted_run(optimizer, iterations, tmp_path, capsys):
    spec = RunSpec("synthetic", optimizer, seed=3, iterations=iterations, deadline=True)
    if optimizer.startswith("optuna"):
        pytest.importorskip("optuna", reason="the Optuna peers need optfarm[peers]")
    whole = run_one(spec)
    path = tmp_path / "run.pkl"
    with pytest.raises(Stop):
        run_one(spec, checkpoint=Checkpoint(path, spec.run_key, every_s=0), on_step=_stop_at(7))
    assert path.exists()
    checkpoint = Checkpoint(path, spec.run_key)
    resumed = run_one(spec, checkpoint=checkpoint)
    assert checkpoint.resumed
    assert "resumes from its checkpoint after 7 evaluations" in capsys.readouterr().err
    assert resumed.trace.num_rows == whole.trace.num_rows == iterations
    assert _columns(resumed.trace) == _columns(whole.trace)
    assert resumed.summary["recommendation"] == whole.summary["recommendation"]
    assert resumed.cpu_s_before > 0  # the CPU of the part before the stop is counted


def test_optuna_gp_resumes_with_torch(tmp_path):
    pytest.importorskip("torch", reason="optuna-gp needs torch (optfarm[peers])")
    spec = RunSpec("synthetic", "optuna-gp", seed=1, iterations=16, deadline=True)
    whole = run_one(spec)
    path = tmp_path / "run.pkl"
    with pytest.raises(Stop):
        run_one(spec, checkpoint=Checkpoint(path, spec.run_key, every_s=0), on_step=_stop_at(12))
    resumed = run_one(spec, checkpoint=Checkpoint(path, spec.run_key))
    assert _columns(resumed.trace) == _columns(whole.trace)


def _checkpoint_of(spec: RunSpec, path) -> None:
    with pytest.raises(Stop):
        run_one(spec, checkpoint=Checkpoint(path, spec.run_key, every_s=0), on_step=_stop_at(4))


def test_a_checkpoint_the_run_cannot_use_is_set_aside_and_the_run_starts_afresh(tmp_path, capsys):
    spec = RunSpec("synthetic", "lynceus", seed=2, iterations=8, deadline=True)
    whole = _columns(run_one(spec).trace)
    path = tmp_path / "run.pkl"
    _checkpoint_of(spec, path)
    own = path.read_bytes()
    _checkpoint_of(RunSpec("synthetic", "lynceus", seed=5, iterations=8, deadline=True), path)
    # another run's, one written under other library versions, a torn file
    with path.open("rb") as f:
        header = pickle.load(f)
        rest = f.read()
    foreign = {**header, "run_key": spec.run_key, "written_by": {**written_by(), "numpy": "0"}}
    cases = {
        "written for run": path.read_bytes(),
        "written under other versions": pickle.dumps(foreign) + rest,
        "unreadable": own[: len(own) // 2],
    }
    for why, data in cases.items():
        path.write_bytes(data)
        checkpoint = Checkpoint(path, spec.run_key)
        assert _columns(run_one(spec, checkpoint=checkpoint).trace) == whole
        assert not checkpoint.resumed
        err = capsys.readouterr().err
        assert why in err and "the run starts from its first step" in err
        assert not path.exists() and (tmp_path / "run.pkl.unused").read_bytes() == data


def test_a_checkpoint_is_announced_from_its_header_alone(tmp_path, capsys):
    """What a driver says of a run that resumes in another process: the counts written in the
    header, or why the run will start from its first step; the file left to the run."""
    spec = RunSpec("synthetic", "random", seed=0, iterations=8)
    path = tmp_path / "run.pkl"
    Checkpoint(path, spec.run_key).announce()  # none yet: nothing said
    assert capsys.readouterr().err == ""
    _checkpoint_of(spec, path)
    with path.open("rb") as f:
        header = pickle.load(f)
        rest = f.read()
    Checkpoint(path, spec.run_key, words="run random").announce()
    said = f"farm: run random resumes from its checkpoint after {header['evaluations']} "
    assert said + f"evaluations ({header['cpu_s']:.0f} CPU-s)\n" == capsys.readouterr().err
    assert header["evaluations"] >= 4  # the rows up to the step it stopped at
    older = {k: v for k, v in header.items() if k not in ("evaluations", "cpu_s")}
    path.write_bytes(pickle.dumps(older) + rest)  # written before the header kept the counts
    Checkpoint(path, spec.run_key, words="run random").announce()
    assert capsys.readouterr().err == "farm: run random resumes from its checkpoint\n"
    Checkpoint(path, "another run").announce()
    err = capsys.readouterr().err
    assert f"written for run {spec.run_key}; the run starts from its first step" in err
    assert path.exists()


def test_a_run_that_fails_after_resuming_sets_its_checkpoint_aside(tmp_path, capsys):
    spec = RunSpec("synthetic", "random", seed=0, iterations=8)
    path = tmp_path / "run.pkl"
    _checkpoint_of(spec, path)
    with pytest.raises(Stop):  # the resumed run fails: its retry must not resume again
        run_one(spec, checkpoint=Checkpoint(path, spec.run_key), on_step=_stop_at(6))
    assert "the run resumed from it failed (Stop)" in capsys.readouterr().err
    assert not path.exists()


def test_smac_writes_no_checkpoint(tmp_path):
    pytest.importorskip("smac", reason="smac-hpo needs optfarm[peers]")
    spec = RunSpec("synthetic", "smac-hpo", seed=0, iterations=6)
    path = tmp_path / "run.pkl"
    run_one(spec, checkpoint=Checkpoint(path, spec.run_key, every_s=0))
    assert not path.exists()


def _sweep_command(out) -> list[str]:
    return [
        sys.executable,
        "-m",
        "optfarm.farm",
        "sweep",
        "--datasets",
        "synthetic",
        "--optimizers",
        "eic",
        "--seeds",
        "1",
        "--iterations",
        "24",
        "--out",
        str(out),
        "--serial",
        "--no-progress",
        "--no-tracking",
    ]


def test_a_sweep_killed_mid_run_resumes_that_run_from_its_checkpoint(tmp_path):
    out, whole = tmp_path / "killed", tmp_path / "whole"
    env = {**os.environ, "OPTFARM_CHECKPOINT_S": "0"}  # a checkpoint before every step
    proc = subprocess.Popen(
        _sweep_command(out), env=env, stderr=subprocess.PIPE, start_new_session=True
    )
    folder = out / "checkpoints"
    deadline = time.monotonic() + 300
    while not (folder.exists() and any(folder.glob("*.pkl"))):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "no checkpoint within 300 s"
        time.sleep(0.2)
    time.sleep(1.0)  # a few more steps
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    assert not Store(out).finished()  # the run was stopped mid-way

    again = subprocess.run(_sweep_command(out), env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert "resumes from its checkpoint after" in again.stderr
    assert not any(folder.glob("*.pkl"))  # stored: its checkpoint removed

    assert main(_sweep_command(whole)[3:] + ["--no-progress"]) == 0
    (key,) = Store(whole).finished()
    assert _columns(Store(out).trace(key)) == _columns(Store(whole).trace(key))


def test_a_bad_checkpoint_setting_is_bad_input(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPTFARM_CHECKPOINT_S", "often")
    assert main(_sweep_command(tmp_path / "out")[3:]) == 2
    err = capsys.readouterr().err
    assert "$OPTFARM_CHECKPOINT_S='often': not a number of seconds (>= 0) or 'off'" in err
    assert not (tmp_path / "out").exists()


def test_the_checkpoint_of_a_stored_run_is_removed_when_the_sweep_runs_again(tmp_path):
    command = _sweep_command(tmp_path / "out")[3:]
    command[command.index("eic")] = "random"
    assert main(command) == 0
    (key,) = Store(tmp_path / "out").finished()
    left = tmp_path / "out" / "checkpoints" / f"{key}.pkl"  # a driver stopped before removing it
    left.parent.mkdir(exist_ok=True)
    left.write_bytes(b"")
    assert main(command) == 0
    assert not left.exists()
