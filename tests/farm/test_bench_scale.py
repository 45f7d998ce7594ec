"""`farm bench --scale`: every optimizer against table size, each run in a process of its own
with its address space capped. No timed assertions: the numbers are the benchmark's."""

from __future__ import annotations

import json

from optfarm.farm.bench.scale import SCALE_GRIDS, measure_run, scale_dataset, scale_rows
from optfarm.farm.cli import main
from optfarm.oracle.registry import load


def test_the_tables_are_the_cloud_grids_of_each_size():
    for size, grid in SCALE_GRIDS.items():
        assert grid.n_configs == size
    assert scale_dataset(384).space().n_configs == 384
    big = scale_dataset(9216)
    assert big.name == "cloud-grid-9216" and big.to_table().equals(load(big.name).to_table())


def test_a_row_measures_the_loop_of_a_run():
    row = measure_run("eic-usd", 384, 6)
    assert row["status"] == "ok" and row["evaluations"] == 6 and row["configs"] == 384
    assert row["search"] == 4  # 2 bootstrap runs (init_share of 6), then the model
    assert row["cpu_per_eval_s"] > 0 and row["search_suggest_s"] > 0
    assert row["max_rss_mb"] > 50


def test_each_run_is_its_own_process_and_a_run_over_the_cap_is_a_row_not_a_crash():
    fits, over = scale_rows(["random"], [384], 3), scale_rows(["eic"], [384], 3, memory_cap_gb=0.3)
    assert fits[0]["status"] == "ok" and fits[0]["evaluations"] == 3
    assert fits[0]["max_rss_mb"] < 2000
    # the interpreter with numba's LLVM maps about 1.6 GB before the run: a row at once, with
    # the size, whatever allocation of the install would have failed first under the cap
    assert over[0]["status"].startswith("MemoryError over the 0.3 GB cap")
    assert "already map" in over[0]["status"]


def test_json_output_and_bad_input(capfd):
    args = ["bench", "--scale", "384", "--optimizers", "random", "--evaluations", "2"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capfd.readouterr().out)
    assert [r["optimizer"] for r in out["rows"]] == ["random"]
    assert set(out["meta"]["machine"]["threads"].values()) == {"1"}
    assert main(["bench", "--scale", "1000"]) == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "no generated table of 1000 configurations" in err
    assert main(["bench", "--scale", "384", "--optimizers", "nosuch"]) == 2
    assert "unknown optimizer 'nosuch'" in capfd.readouterr().err
