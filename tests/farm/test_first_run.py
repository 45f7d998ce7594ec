"""What a new user meets in the first hour: `farm run`'s summary and its defaults, `--json` on
every command that prints a table, tables within 100 columns, "did you mean", Ray on a machine
that never ran it, and the small untruths of issue 13 (each with its own test)."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from optfarm.farm.cli import main
from optfarm.farm.cli.run import Progress
from optfarm.farm.report.analysis import analyse
from optfarm.farm.report.page import write_report

from .test_report import make_run, sweep

ROOT = Path(__file__).resolve().parents[2]


def test_the_first_run_explains_itself(capsys):
    """`farm run` with no option: Lynceus (LA = 1) against the synthetic dataset's optimum,
    its recommendation in units against the constraints, CNO in words, what exploring cost,
    and the comparison sweep to run next; every line within 100 columns."""
    assert main(["run"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("lynceus on synthetic, seed 0:")
    assert max(map(len, lines)) <= 100
    flat = " ".join(out.split())  # long lines wrap
    for part in (
        "goal minimise cost (USD) subject to accuracy >= 0.85 and time <= 5330 s",
        "optimizer lynceus la=1",
        "recommended ",
        "true (mean) cost ",
        "(meets time <= 5330 s)",
        ": feasible",
        "optimum ",
        "Cost Normalised to the Optimum: 1 is the best possible",
        "exploring ",
        "h of job time",
        "farm sweep --name first --datasets synthetic --optimizers lynceus,",
        "farm report sweeps-out/first",
    ):
        assert part in flat, part
    cno = float(re.search(r"^CNO +([0-9.]+):", out, re.M).group(1))
    assert 1.0 <= cno < 1.1  # a model-based optimizer gets close to the optimum


def test_an_infeasible_recommendation_says_which_constraint_and_why(capsys):
    """Random search over all 360 configurations recommends one whose observed (noisy) run met
    time <= 5330 s while its mean does not."""
    assert main(["run", "--optimizer", "random", "--iterations", "360"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "(BREAKS time <= 5330 s)" in out
        and ": INFEASIBLE why its mean time 5493 s breaks "
        "time <= 5330 s, but the run the optimizer observed measured 5289 s: a noisy draw "
        "passed where the mean does not"
        in out
    )


def test_run_json_adds_fields_and_keeps_the_old_ones(capsys):
    assert main(["run", "--optimizer", "random", "--iterations", "40", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert {
        "run_key",
        "dataset",
        "optimizer",
        "params",
        "seed",
        "problem",
        "metric",
        "n_evaluations",
        "n_timed_out",
        "exploration_cost",
        "exploration_time",
        "stop_reason",
        "recommendation",
        "optimum",
        "exploration_cost_to_reach",
        "recommendation_latency_s",
        "units",
    } <= set(s)
    assert "recurring_job" not in s  # Guindani's accounting only for guindani runs
    assert s["units"] == {"cost": "USD", "time": "s"}
    rec, best = s["recommendation"], s["optimum"]
    assert {
        "config_id",
        "config",
        "cno",
        "feasible",
        "cost",
        "time",
        "accuracy",
        "constraints",
    } <= set(rec)
    assert [c["constraint"] for c in rec["constraints"]] == ["accuracy>=0.85", "time<=5330"]
    assert rec["feasible"] == all(c["holds"] for c in rec["constraints"])
    assert all(len(c["observed"]) >= 1 for c in rec["constraints"])  # it was run
    assert best["cost"] > 0 and set(best["config"]) == set(rec["config"])
    assert rec["cno"] == pytest.approx(rec["cost"] / best["cost"])


def test_run_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for part in (
        "(default: synthetic)",
        "(default: lynceus with --param la=1",
        "(default: 0)",
        "(default: sample)",
        "(default: unlimited)",
    ):
        assert part in text, part


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_line_on_a_terminal_only_and_erased_at_the_end():
    row = {
        "step": 11,
        "cum_exploration_cost": 9.39,
        "incumbent_cno": 1.795,
        "incumbent_accuracy_c": float("nan"),
        "incumbent_feasible": True,
    }
    term = _Terminal()
    p = Progress(term, "lynceus on synthetic", after_s=0.0)
    p.step(row)
    p.close()
    text = term.getvalue()
    assert "starting" in text and "12 evaluations, exploring cost 9.39, incumbent CNO 1.795" in text
    assert text.endswith("\r") and "\n" not in text
    quiet = _Terminal()
    Progress(quiet, "x", enabled=False, after_s=0.0).step(row)
    assert quiet.getvalue() == ""
    piped = io.StringIO()
    Progress(piped, "x", after_s=0.0).step(row)
    assert piped.getvalue() == ""


def test_optimizers_is_compact_and_one_optimizer_has_its_table(capsys):
    assert main(["optimizers"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) < 40 and max(map(len, lines)) <= 100
    assert main(["optimizers", "lynceus"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 100
    assert any(line.startswith("la ") and "[0, 3]" in line for line in lines)
    assert main(["optimizers", "lynceu"]) == 2
    assert "did you mean 'lynceus'" in capsys.readouterr().err


def test_json_on_every_table_command(capsys, tmp_path):
    assert main(["optimizers", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)["optimizers"]
    lynceus = next(e for e in entries if e["name"] == "lynceus")
    assert {"name", "summary", "params"} <= set(lynceus)
    assert {"name": "la", "default": 2, "allowed": "[0, 3]"}.items() <= lynceus["params"][0].items()
    assert main(["optimizers", "obol", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "obol"
    assert main(["datasets", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["datasets"][0]["name"] == "synthetic"
    assert listed["datasets"][0]["constraints"] == ["accuracy>=0.85", "time<=5330"]
    assert "lynceus-cnn" in listed["not_fetched"]
    out = tmp_path / "sweep"
    assert (
        main(
            [
                "sweep",
                "--datasets",
                "synthetic",
                "--optimizers",
                "random,eic-usd",
                "--seeds",
                "2",
                "--iterations",
                "6",
                "--serial",
                "--no-tracking",
                "--no-progress",
                "--out",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert (summary["runs"], summary["done"], summary["failed"]) == (4, 4, 0)
    assert {r["optimizer"] for r in summary["rows"]} == {"random", "eic-usd"}
    assert main(["report", str(out), "--no-tracking", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["runs"] == 4 and Path(report["report"]).is_file()
    assert any(f.endswith("stats.json") for f in report["files"])


def test_report_time_to_columns_have_a_unit(tmp_path):
    trace, summaries = sweep([make_run("a", "d", "opt", 0, [1, 1], [3.0, 1.0], [True, True])])
    write_report(analyse(trace, summaries), tmp_path, title="t")
    page = (tmp_path / "report.html").read_text()
    assert "<th>time p50 (s)</th>" in page and "<td>cno&lt;=2</td>" in page  # a row per target


def test_iterations_zero_is_bad_input(capsys):
    assert main(["run", "--iterations", "0"]) == 2
    assert capsys.readouterr().err.strip() == "farm: error: --iterations must be at least 1, got 0"


def test_obol_runs_without_a_budget_as_the_readme_says(capsys):
    readme = (ROOT / "README.md").read_text()
    assert "`obol` needs\n`--budget`" not in readme and "`obol` needs `--budget`" not in readme
    assert main(["run", "--optimizer", "obol", "--iterations", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_evaluations"] == 8


def test_bench_with_nothing_measured_fails(capfd):
    """Only a "dataset not fetched" row is no benchmark: exit 2, one line saying why."""
    assert (
        main(["bench", "--optimizers", "lynceus:la=0", "--datasets", "lynceus-cnn", "--json"]) == 2
    )
    out, err = capfd.readouterr()  # the benchmark runs in a child process
    assert json.loads(out)["rows"][0]["status"] == "skipped"
    assert (
        "farm: error: nothing was measured, every case was skipped (first: lynceus on "
        "lynceus-cnn: dataset not fetched (farm datasets fetch lynceus-cnn))" in err
    )


def test_a_mistyped_spec_key_gets_a_suggestion(tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text("name: x\ndatasets: [synthetic]\noptimizers: [random]\nseed: 3\n")
    assert main(["sweep", str(spec), "--serial", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("seed: unknown key (did you mean 'seeds'?)") and "\n" not in err


def test_a_mistyped_parameter_gets_a_suggestion(capsys):
    assert main(["run", "--param", "lla=2"]) == 2
    assert "unknown parameter 'lla' (did you mean 'la'?)" in capsys.readouterr().err


def test_ray_sweep_on_a_machine_that_never_ran_ray(tmp_path):
    """A temporary HOME without ~/.ray: `farm sweep` creates Ray's token, runs on a local Ray,
    and prints none of Ray's or MLflow's start-up chatter."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "OPTFARM_DATA": str(tmp_path / "data")}
    env.pop("RAY_AUTH_MODE", None)
    # stdout on a terminal: Ray's colorama wrote ESC[0m there at exit
    terminal, side = pty.openpty()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "optfarm",
            "sweep",
            "--datasets",
            "synthetic",
            "--optimizers",
            "random",
            "--seeds",
            "2",
            "--iterations",
            "4",
            "--out",
            str(tmp_path / "out"),
            "--no-progress",
        ],
        stdout=side,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    os.close(side)
    chunks: list[bytes] = []
    reader = threading.Thread(target=_read_all, args=(terminal, chunks))
    reader.start()
    err = proc.communicate(timeout=300)[1]
    reader.join(10)
    out = b"".join(chunks).decode()
    assert proc.returncode == 0, err[-2000:]
    lines = out.rstrip().splitlines()
    assert "sweep inline: 2 runs" in out and lines[-2].rstrip().endswith("(ok)"), out
    assert lines[-1].startswith("  to look: mlflow ui --workers 1 "), out
    assert "\x1b[" not in out  # no colour codes, no stray reset at exit
    assert (home / ".ray" / "auth_token").is_file()
    assert "created Ray's authentication token" in err
    for chatter in (
        "Creating initial",
        "Updating database tables",
        "Token authentication",
        "Started a local Ray instance",
        "alembic",
    ):
        assert chatter not in err and chatter not in out, chatter


def _read_all(fd: int, chunks: list[bytes]) -> None:
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:  # EIO: the other side of the terminal closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(fd)
