"""``farm bench-farm``'s measurements of ``farm report``
(``optfarm.farm.bench.overhead.report_cost``): the peak memory is the report's own, not that of the
process that runs the benchmark."""

from __future__ import annotations

from optfarm.farm.bench.overhead import report_cost
from optfarm.farm.cli import main


def test_the_reports_peak_memory_is_its_own_not_the_benchmarks(tmp_path):
    out = tmp_path / "sweep"
    assert (
        main(
            [
                "sweep",
                "--datasets",
                "synthetic",
                "--optimizers",
                "random",
                "--seeds",
                "2",
                "--iterations",
                "5",
                "--serial",
                "--no-tracking",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    held = bytearray(800 * 2**20)  # the benchmark holding a large sweep's records
    held[::4096] = b"\x01" * len(held[::4096])
    measured = report_cost(str(out))
    # a report of two runs peaks at about 175 MB (Python, numpy, pyarrow, matplotlib): forked
    # from this process, its ru_maxrss would count these 800 MB
    assert 50 < measured["report_rss_mb"] < 500
    assert measured["report_cpu_s"] > 0 and measured["report_s"] > 0
    del held
