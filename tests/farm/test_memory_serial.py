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
