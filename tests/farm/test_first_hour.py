"""What a new user trips on in the set-up and the first hour, third round (issue 36): the
README's test command shows why tests skip, a first compile is announced, `farm run` stops an
optimizer with no stopping rule and does not contradict itself, specs and constraints read as
meant. Each test failed before its fix."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from optfarm.farm.cli import main

from .test_cli_edges import one_line_error

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_pytest_command_prints_each_skip_reason(tmp_path):
    """`python -m pytest` with the project's configuration (no -rs typed) names why a test
    was skipped."""
    (tmp_path / "test_skipping.py").write_text(
        "import pytest\n\ndef test_needs_data():\n    pytest.skip('get the data with farm "
        "datasets fetch x')\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_skipping.py"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert "1 skipped" in proc.stdout, proc.stdout[-2000:]
    assert re.search(
        r"^SKIPPED \[1\] .*get the data with farm datasets fetch x$", proc.stdout, re.MULTILINE
    ), proc.stdout[-2000:]


def test_a_first_compile_of_the_kernels_is_announced_with_its_length(tmp_path):
    """With nothing in numba's cache a tree-based optimizer's run says on stderr that it
    compiles first and roughly how long; random search (no kernels) says nothing."""
    code = (
        "import sys; from optfarm.farm.cli.run import _oracle, _say_first_compile; "
        "from optfarm.farm.run.spec import RunSpec; spec = RunSpec('synthetic', sys.argv[1]); "
        "_say_first_compile(spec, _oracle(spec))"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    said = {
        name: subprocess.run(
            [sys.executable, "-c", code, name],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        for name in ("lynceus", "random")
    }
    line = said["lynceus"].stderr.strip()
    said_kernels = re.fullmatch(
        r"farm: compiling (\d+) numba kernels of the tree models first, roughly "
        r"(\d+) s of CPU \(once for this install: numba caches them\)",
        line,
    )
    assert said_kernels, line
    assert said["random"].returncode == 0 and said["random"].stderr == ""
    # the guide says what the run says (it said 18 kernels and about 90 s; the run, 24 and 120)
    guide = " ".join((ROOT / "docs" / "guide" / "first-hour.md").read_text().split())
    kernels, seconds = said_kernels.groups()
    assert f"compiles {kernels} numba kernels first" in guide
    assert f'("compiling {kernels} numba kernels of the tree models first, roughly {seconds} s' in (
        guide
    )


@pytest.mark.slow
def test_a_first_compile_is_announced_once(tmp_path):
    """The run after the first compiles nothing and says nothing: the 3 kernels numba inlines
    into their callers (``inline="always"``) have no code of their own in the cache and were
    counted, so the line came back on every run ("compiling 3 numba kernels")."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    runs = [
        subprocess.run(
            [sys.executable, "-m", "optfarm", "run", "--quiet"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=3600,
            check=True,
        )
        for _ in range(2)
    ]
    assert "farm: compiling 24 numba kernels" in runs[0].stderr, runs[0].stderr
    assert "compiling" not in runs[1].stderr, runs[1].stderr


def test_random_without_a_limit_stops_at_a_default_and_says_so(capsys):
    assert main(["run", "--optimizer", "random", "--seed", "1"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("random on synthetic, seed 1: 50 evaluations in ")
    assert (
        "random has no stopping rule of its own and the run no budget: stopping after 50 "
        "evaluations (--iterations N or --budget B to choose)" in err
    )
    assert main(["run", "--optimizer", "random", "--iterations", "7", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "7 evaluations" in out and err == ""  # a limit given: no default
    assert main(["run", "--optimizer", "random", "--budget", "5", "--quiet"]) == 0
    assert "stopping after" not in capsys.readouterr().err  # a budget stops it


def test_a_target_reached_then_lost_is_not_a_contradiction(capsys):
    """Random search over every configuration (seed 1): an earlier recommendation reached
    CNO <= 2 and 1.1, the final one is infeasible; the summary says which is which."""
    assert main(["run", "--optimizer", "random", "--seed", "1", "--iterations", "360"]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert "CNO none: the recommendation is infeasible, so no cost ratio counts" in flat
    assert "CNO never" not in flat
    assert (
        "reached CNO <= 2 after 59.87 USD*, CNO <= 1.1 after 59.87 USD*, CNO <= 1 (the "
        "optimum) never" in flat
    )
    assert "* an earlier recommendation met it; the final one does not" in flat


def test_a_spec_folder_is_named_a_folder_with_its_specs(tmp_path, capsys):
    (tmp_path / "a.yaml").write_text("name: a\n")
    (tmp_path / "b.yml").write_text("name: b\n")
    assert main(["sweep", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    one_line_error(
        capsys, f"{tmp_path} is a folder; a sweep spec is a YAML file (in it: a.yaml, b.yml)"
    )
    assert not (tmp_path / "out").exists()


def test_iterations_that_are_no_count_name_the_key_and_the_limit(tmp_path, capsys):
    for value in ("1.0e300", "1.0e+300", "2.5"):
        path = tmp_path / "spec.yaml"
        path.write_text(
            f"name: s\ndatasets: [synthetic]\noptimizers: [random]\n"
            f"limits: {{iterations: {value}}}\n"
        )
        assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
        err = one_line_error(
            capsys,
            "limits.iterations: ",
            "is not a whole number of evaluations from 1 to 1,000,000,000",
        )
        assert "unable to parse" not in err.lower()


def test_datasets_list_and_show_give_each_constraint_its_unit(capsys):
    assert main(["datasets", "list"]) == 0
    row = next(
        line for line in capsys.readouterr().out.splitlines() if line.startswith("synthetic ")
    )
    assert row.rstrip().endswith("accuracy>=0.85, time<=5330 s")
    assert main(["datasets", "show", "synthetic"]) == 0
    assert "constraints: accuracy>=0.85, time<=5330 s" in capsys.readouterr().out


def test_the_sweep_summary_gives_the_cost_its_unit(capsys):
    from optfarm.farm.cli.sweep import print_summary

    row = {
        "dataset": "spark-vms",
        "optimizer": "lynceus",
        "params": "-",
        "runs": 10,
        "failed": 0,
        "metric": "cno",
        "final_p50": 1.02,
        "final_p90": 1.5,
        "cost_p50": 12.5,
        "cost_unit": "VM x ms",
        "evals_p50": 20.0,
        "latency_p50_s": 0.01,
    }
    print_summary([row])
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("optimizer"))
    assert "cost_p50 (VM x ms)" in header and max(map(len, lines)) <= 100


def _report_page(tmp_path, times_scale: float = 1.0) -> str:
    from optfarm.farm.report.analysis import analyse
    from optfarm.farm.report.page import write_report

    from .test_report import make_run, sweep

    runs = [
        make_run(f"{o}{s}", "synthetic", o, s, [1000.0 * times_scale] * 3, cnos, [True] * 3)
        for o, cnos in (("lynceus", [3.0, 1.5, 1.0]), ("random", [4.0, 2.0, 1.5]))
        for s in range(3)
    ]
    write_report(analyse(*sweep(runs)), tmp_path, title="t")
    return (tmp_path / "report.html").read_text()


def test_the_report_opens_on_a_verdict_and_keeps_its_tables_narrow_and_numbers_plain(tmp_path):
    """A one-line verdict under the title; no table of more than 8 columns (the reach targets
    are rows of their own table: as columns they made it 1,500 px wide), and tables scroll
    inside the page; times of 30,000 s and more in plain digits, not 3e+04."""
    page = _report_page(tmp_path, times_scale=10.0)
    text = re.sub(r'src="data:image/png;base64,[^"]*"', "", page)
    first = text.split("<h1>t</h1>", 1)[1].lstrip().splitlines()[0]
    assert first.startswith(
        '<p class="verdict"><b>Verdict.</b> synthetic (3 seeds): 1st, tied: lynceus (final '
        "CNO p50 1, p90 1; median exploration cost 30,000), random (1.5, 1.5; 30,000); 3 seeds "
        "cannot separate any two (a signed-rank test needs 6)."
    )
    for table in re.findall(r"<table>.*?</table>", text, re.DOTALL):
        header = re.search(r"<tr>(.*?)</tr>", table).group(1)
        assert header.count("<th>") <= 8, header
    assert "overflow-x:auto" in text
    assert not re.search(r"\de[+-]\d", text), re.findall(r".{40}\de[+-]\d.{10}", text)
    assert "<td>300,000</td>" in text  # the time to the optimum (s)


def test_curves_that_coincide_are_drawn_wide_under_narrow():
    """Each curve of a figure is thinner than the one drawn before it: two variants with the
    same p50 curve show as a narrow line inside a wide one, not one line."""
    from optfarm.farm.report.plots import _styles

    styles = _styles(["lynceus", "eic-usd", "random"])
    widths = [styles[k]["lw"] for k in ("lynceus", "eic-usd", "random")]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == 3
    assert min(widths) >= 1.0 and len({s["color"] for s in styles.values()}) == 3


def test_the_mlflow_ui_command_of_the_docs_serves_and_the_sweep_prints_it(tmp_path, capsys):
    """docs/guide/first-hour.md's `mlflow ui` (one worker, on loopback) serves the sweep's database,
    and `farm sweep` prints that command under its MLflow line."""
    import shlex
    import urllib.request

    from optfarm.farm.tracking.mlflow_connection import UI_COMMAND as MLFLOW_UI

    from .conftest import free_port, start_group, stop_groups, wait_for_port

    out = tmp_path / "sweep"
    args = [
        "sweep",
        "--datasets",
        "synthetic",
        "--optimizers",
        "random",
        "--iterations",
        "3",
        "--serial",
        "--no-progress",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    uri = f"sqlite:///{out.resolve() / 'mlflow.db'}"
    assert f"  to look: {MLFLOW_UI} --backend-store-uri {uri}" in capsys.readouterr().out
    doc = (ROOT / "docs" / "guide" / "first-hour.md").read_text()
    (line,) = [x for x in doc.splitlines() if x.startswith("mlflow ui ")]
    assert line.startswith(MLFLOW_UI + " --backend-store-uri sqlite:///")
    port = free_port()
    command = shlex.split(line.split(" --backend-store-uri")[0].replace("5000", str(port)))
    mlflow = Path(sys.executable).with_name("mlflow")
    proc = start_group([str(mlflow), *command[1:], "--backend-store-uri", uri], tmp_path / "ui.log")
    try:
        wait_for_port(port, proc, 300, tmp_path / "ui.log")
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=60).read() == b"OK"
    finally:
        stop_groups([proc])


def test_every_mlflow_ui_command_shown_runs_one_worker():
    """Each `mlflow ui` command the README, the guide and the shipped sweep specs show has
    `--workers 1` (quickstart.yaml's comment lacked it: MLflow's default 4 workers did not
    come up in 5 minutes on a busy 2-core machine)."""
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    files += sorted((ROOT / "optfarm" / "sweeps").glob("*.yaml"))
    commands = [
        (path.name, line)
        for path in files
        for line in path.read_text().splitlines()
        if "mlflow ui --" in line
    ]
    assert any(name == "quickstart.yaml" for name, _ in commands)
    missing = [f"{name}: {line}" for name, line in commands if "mlflow ui --workers 1" not in line]
    assert missing == []


def test_the_run_summary_writes_small_numbers_plainly_with_their_units(capsys):
    """No exponent notation in `farm run`'s summary: the latency in µs or ms (it printed
    `4.586e-05 s per suggestion`), costs and times as plain numbers."""
    assert main(["run", "--optimizer", "random", "--iterations", "10"]) == 0
    out = capsys.readouterr().out
    assert not re.search(r"\de[-+]?\d", out), out
    (latency,) = [line for line in out.splitlines() if line.startswith("latency")]
    unit = r"[\d.]+ (µs|ms|s)"
    assert re.fullmatch(rf"latency +{unit} per suggestion \(median; p90 {unit}\)", latency), latency
