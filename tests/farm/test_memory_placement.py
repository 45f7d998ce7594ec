"""Each run on Ray holds the memory it is estimated to need (issue 41 item 3): its actor asks
for that much of the node's ``memory`` resource, so Ray never places more runs on a node than
its memory holds, and a run that needs more than any node has is recorded as failed at once
instead of waiting for a node that never comes. The estimates here are the optimizer's
declaration (``optfarm.optimizers.base.MemoryUse``) set in the driver, which alone reads it."""

from __future__ import annotations

from optfarm.farm.sweep.runner import run_sweep
from optfarm.farm.sweep.spec import parse_spec


def _random_spec(seeds: int, iterations: int = 40):
    return parse_spec(
        {
            "name": "memory-placement",
            "datasets": ["synthetic"],
            "optimizers": ["random"],
            "seeds": seeds,
            "limits": {"iterations": iterations},
            "runtime": {"max_in_flight": 2},
            "tracking": {"enabled": False},
        }
    )


def _node_memory(ray) -> float:
    return max(n["Resources"].get("memory", 0) for n in ray.nodes() if n["Alive"])


def test_runs_hold_the_memory_they_need_so_a_node_is_never_over_committed(
    ray_local, tmp_path, monkeypatch
):
    """Each run's actor holds its estimate of the node's ``memory`` resource: with runs
    declared to need 60% of the node's memory, Ray places one actor though two CPUs are free
    (every run goes to the same actor, one after the other), and all are stored. Without the
    estimate the two CPUs hold two actors."""
    from optfarm.optimizers.base import MemoryUse
    from optfarm.optimizers.random_search import RandomSearch

    monkeypatch.setattr(RandomSearch, "memory", MemoryUse(fixed=0.6 * _node_memory(ray_local)))
    pids: list[int] = []
    report = run_sweep(
        _random_spec(4, iterations=360),  # whole runs: long enough for a second actor
        tmp_path / "out",
        progress=False,
        on_submit=lambda run, where: pids.append(where["pid"]),
    )
    assert report.complete and report.done == 4
    assert len(pids) == 4 and len(set(pids)) == 1, pids


def test_a_run_that_needs_more_memory_than_any_node_fails_at_once(
    ray_local, tmp_path, monkeypatch, capfd
):
    """A run declared to need more memory than the largest node has is not sent (Ray would
    never place it): recorded as failed at once, one line, and the sweep goes on."""
    from optfarm.optimizers.base import MemoryUse
    from optfarm.optimizers.random_search import RandomSearch

    largest = _node_memory(ray_local)
    monkeypatch.setattr(RandomSearch, "memory", MemoryUse(fixed=2 * largest))
    report = run_sweep(_random_spec(2), tmp_path / "out", progress=False)
    err = capfd.readouterr().err
    assert report.failed == 2 and report.done == 0
    assert all(f["error"].startswith("not run: needs about") for f in report.failures)
    lines = [line for line in err.splitlines() if "more than any node has" in line]
    assert len(lines) == 2, err
