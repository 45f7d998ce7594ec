"""In-process (``--serial``), a run that needs more memory than the machine has available is
not started: it is recorded as failed, said in one line, and the sweep goes on (the kernel's
OOM killer would end the whole sweep with it: issue 41). The estimate is the optimizer's
declaration (``optfarm.optimizers.base.MemoryUse``), here made larger than any machine."""

from __future__ import annotations

from optfarm.farm.cli import main
from optfarm.farm.runtime.memory import available_bytes
from optfarm.farm.store.store import Store
from optfarm.optimizers.base import MemoryUse

from .memory_hog import NAME, MemoryHog, register


def test_a_run_that_does_not_fit_is_not_started_in_process(tmp_path, monkeypatch, capfd):
    register()
    available = available_bytes()
    assert available is not None and available > 0
    monkeypatch.setattr(MemoryHog, "memory", MemoryUse(fixed=10 * available))
    code = main(
        [
            "sweep",
            "--datasets",
            "synthetic",
            "--optimizers",
            f"{NAME},random",
            "--seeds",
            "2",
            "--iterations",
            "5",
            "--serial",
            "--no-progress",
            "--no-tracking",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    err = capfd.readouterr().err
    records = list(Store(tmp_path / "out").records())
    failed = [r for r in records if r["status"] == "failed"]
    assert code == 1 and len(records) == 4 and len(failed) == 2, err
    assert all(r["spec"]["optimizer"] == NAME for r in failed)
    assert all(r["error"].startswith("not run: needs about") for r in failed)
    said = [line for line in err.splitlines() if "is available: not run" in line]
    assert len(said) == 2 and said[0].startswith(f"farm: warning: run {NAME} on synthetic seed 0")


def test_a_run_out_of_memory_in_process_is_one_line_and_the_sweep_goes_on(tmp_path, capfd):
    """A run that runs out of memory in-process (numpy's MemoryError) is recorded as failed
    with it, said in one line as it happens, and the other runs are stored."""
    register()
    code = main(
        [
            "sweep",
            "--datasets",
            "synthetic",
            "--optimizers",
            NAME,
            "--param",
            f"{NAME}.impossible=true",
            "--seeds",
            "3",
            "--iterations",
            "5",
            "--serial",
            "--no-progress",
            "--no-tracking",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    err = capfd.readouterr().err
    records = {r["spec"]["seed"]: r for r in Store(tmp_path / "out").records()}
    assert code == 1 and len(records) == 3, err
    assert records[0]["status"] == "failed" and records[0]["error"].startswith("MemoryError")
    assert records[1]["status"] == records[2]["status"] == "done"
    said = [line for line in err.splitlines() if "ran out of memory" in line]
    assert len(said) == 1 and said[0].startswith(f"farm: warning: run {NAME} on synthetic seed 0")
    assert "Traceback" not in err


def test_estimates_cover_the_process_the_oracle_and_what_each_optimizer_declares():
    """A run's estimate: the process, the oracle over the table, and the optimizer's own
    structures (random search declares none); TrimTuner's covers its joint posterior over
    at most 512 representers, no longer one over every pair of configurations (25.3 GiB at
    9,216, issue 41): 389 MB max RSS measured in all there."""
    from optfarm.farm.run.spec import RunSpec
    from optfarm.farm.runtime.memory import PROCESS_BYTES, run_memory
    from optfarm.optimizers.registry import available, get
    from optfarm.optimizers.trimtuner import TrimTuner
    from optfarm.oracle.registry import load

    synthetic = load("synthetic")
    random = run_memory(RunSpec("synthetic", "random"), synthetic)
    assert PROCESS_BYTES < random < PROCESS_BYTES + 20 * synthetic.table.nbytes
    for name in [n for n in available() if get(n).__module__.startswith("optfarm.")]:
        declared = get(name).memory.bytes(synthetic.space().n_configs)
        assert run_memory(RunSpec("synthetic", name), synthetic) == int(random + declared)
        assert name == "random" or declared > 0, name
    assert TrimTuner.memory.per_pair == 0
    for table, measured, most in (
        ("cloud-grid-9216", 401e6, 2e9),
        ("cloud-grid-50176", 734e6, 4e9),
    ):
        estimate = run_memory(RunSpec(table, "fabolas"), load(table))
        assert measured < estimate < most, (table, estimate)
    assert TrimTuner.memory.bytes(50176) < 50176 / 9216 * TrimTuner.memory.bytes(9216)  # not n^2
