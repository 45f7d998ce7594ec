"""The generated large tables (optfarm/oracle/cloud_grid.py): built-in names that need no
download, the issue 41 shapes, about 1% feasible, deterministic, nothing written."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optfarm.farm.cli import main
from optfarm.oracle import registry
from optfarm.oracle.cloud_grid import GRIDS, make_cloud_grid
from optfarm.oracle.oracle import Oracle

SHAPES = {  # name -> values per dimension (vm_type, vm_count, framework, threads)
    "cloud-grid-9216": (12, 12, 8, 8),
    "cloud-grid-50176": (28, 14, 16, 8),
    "cloud-grid-100352": (28, 28, 16, 8),
}


def test_the_family_is_listed_before_the_cache_and_needs_no_download(isolated_cache, capsys):
    assert registry.available()[: 1 + len(GRIDS)] == ["synthetic", *SHAPES]
    assert main(["datasets", "list", "--json"]) == 0
    listed = {d["name"]: d for d in json.loads(capsys.readouterr().out)["datasets"]}
    for name, shape in SHAPES.items():
        assert listed[name]["configs"] == int(np.prod(shape)) == listed[name]["rows"]
        assert listed[name]["constraints"] == [str(registry.load(name).meta.problem.constraints[0])]
    assert not [p for p in isolated_cache.rglob("*") if "cloud-grid" in p.name]


@pytest.mark.parametrize("name", SHAPES)
def test_shape_kinds_and_about_one_percent_feasible(name):
    dataset = registry.load(name)
    dims = dataset.meta.dimensions
    assert tuple(len(d.values) for d in dims) == SHAPES[name]
    assert [d.kind for d in dims] == ["categorical", "ordinal", "categorical", "ordinal"]
    assert dims[3].values == (1, 2, 3, 4, 6, 8, 12, 16)  # thread counts
    oracle = Oracle(dataset)
    summary = oracle.summary()
    assert summary["n_configs"] == GRIDS[name].n_configs
    assert 0.008 <= summary["n_feasible"] / summary["n_configs"] <= 0.012
    (constraint,) = dataset.meta.problem.constraints
    assert (constraint.metric, constraint.op) == ("time", "<=")
    # the deadline binds: the cheapest configuration misses it, the fastest is not the optimum
    time = dataset.table.column("time").to_numpy()
    cost = dataset.table.column("cost").to_numpy()
    assert time[np.argmin(cost)] > constraint.threshold
    assert cost[np.argmin(time)] > 1.2 * summary["optimum"]["cost"]


def test_generation_is_deterministic_and_the_seed_moves_only_the_noise():
    a, b = make_cloud_grid("cloud-grid-9216"), make_cloud_grid("cloud-grid-9216")
    assert a.table.equals(b.table) and a.meta == b.meta
    other = make_cloud_grid("cloud-grid-9216", seed=1)
    ratio = other.table.column("time").to_numpy() / a.table.column("time").to_numpy()
    assert 0.75 < ratio.min() < 1.0 < ratio.max() < 1.33  # lognormal(0, 0.05) noise twice


def test_the_model_rewards_memory_and_threads_as_documented():
    """Threads up to the vCPUs pay; a compute-optimised VM (2 GiB/vCPU) running Java-serialised
    threads spills, a memory-optimised one does not."""
    d = registry.load("cloud-grid-9216")
    rows = d.table.to_pandas().set_index(["vm_type", "vm_count", "framework", "threads"])
    t = rows["time"]
    assert t[("m.4xlarge", 12, "kryo/none/fine", 16)] < t[("m.4xlarge", 12, "kryo/none/fine", 4)]
    spill_c = (
        t[("c.4xlarge", 12, "java/none/fine", 16)] / t[("c.4xlarge", 12, "kryo/none/fine", 16)]
    )
    spill_r = (
        t[("r.4xlarge", 12, "java/none/fine", 16)] / t[("r.4xlarge", 12, "kryo/none/fine", 16)]
    )
    assert spill_c > 1.3 > spill_r


def test_farm_run_on_the_9216_table(capsys):
    args = ["run", "--dataset", "cloud-grid-9216", "--optimizer", "random", "--iterations", "5"]
    assert main([*args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["dataset"] == "cloud-grid-9216" and summary["n_evaluations"] == 5


def test_a_built_in_name_cannot_be_imported_over(tmp_path, isolated_cache, capsys):
    (tmp_path / "job.csv").write_text("n,time\n1,10\n2,20\n")
    (tmp_path / "job.optfarm.yaml").write_text(
        "optfarm: table/1\nname: cloud-grid-9216\ndimensions: [{name: n, kind: ordinal}]\n"
        "columns: {time: time}\nprice: {formula: 'n * 0.5'}\n"
    )
    assert main(["datasets", "import", "csv", "--from", str(tmp_path / "job.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'cloud-grid-9216' is a built-in" in err and "--name" in err
    assert not list(isolated_cache.glob("*.parquet"))
