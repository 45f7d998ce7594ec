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

from farm.cli import main

from .test_cli_edges import one_line_error

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_pytest_command_prints_each_skip_reason(tmp_path):
    """`python -m pytest` with the project's configuration (no -rs typed) names why a test
    was skipped."""
    (tmp_path / "test_skipping.py").write_text(
        "import pytest\n\ndef test_needs_data():\n    pytest.skip('get the data with farm "
        "datasets fetch x')\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path),
                           str(tmp_path / "test_skipping.py")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert "1 skipped" in proc.stdout, proc.stdout[-2000:]
    assert re.search(r"^SKIPPED \[1\] .*get the data with farm datasets fetch x$", proc.stdout,
                     re.M), proc.stdout[-2000:]


def test_a_first_compile_of_the_kernels_is_announced_with_its_length(tmp_path):
    """With nothing in numba's cache a tree-based optimizer's run says on stderr that it
    compiles first and roughly how long; random search (no kernels) says nothing."""
    code = ("import sys; from farm.cli.run import _say_first_compile; "
            "_say_first_compile(sys.argv[1])")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    said = {name: subprocess.run([sys.executable, "-c", code, name], env=env, cwd=ROOT,
                                 capture_output=True, text=True, timeout=300)
            for name in ("lynceus", "random")}
    line = said["lynceus"].stderr.strip()
    assert re.fullmatch(r"farm: compiling 1\d numba kernels of the tree models first, roughly "
                        r"\d+ s \(once for this install: numba caches them\)", line), line
    assert said["random"].returncode == 0 and said["random"].stderr == ""


def test_random_without_a_limit_stops_at_a_default_and_says_so(capsys):
    assert main(["run", "--optimizer", "random", "--seed", "1"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("random on synthetic, seed 1: 50 evaluations in ")
    assert "random has no stopping rule of its own and the run no budget: stopping after 50 " \
        "evaluations (--iterations N or --budget B to choose)" in err
    assert main(["run", "--optimizer", "random", "--iterations", "7", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "7 evaluations" in out and err == ""           # a limit given: no default
    assert main(["run", "--optimizer", "random", "--budget", "5", "--quiet"]) == 0
    assert "stopping after" not in capsys.readouterr().err  # a budget stops it


def test_a_target_reached_then_lost_is_not_a_contradiction(capsys):
    """Random search over every configuration (seed 1): an earlier recommendation reached
    CNO <= 2 and 1.1, the final one is infeasible; the summary says which is which."""
    assert main(["run", "--optimizer", "random", "--seed", "1", "--iterations", "360"]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert "CNO none: the recommendation is infeasible, so no cost ratio counts" in flat
    assert "CNO never" not in flat
    assert "reached CNO<=2 after 59.87 USD*, CNO<=1.1 after 59.87 USD*, the optimum never" \
        in flat
    assert "* an earlier recommendation met it; the final one does not" in flat


def test_a_spec_folder_is_named_a_folder_with_its_specs(tmp_path, capsys):
    (tmp_path / "a.yaml").write_text("name: a\n")
    (tmp_path / "b.yml").write_text("name: b\n")
    assert main(["sweep", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    one_line_error(capsys, f"{tmp_path} is a folder; a sweep spec is a YAML file (in it: "
                   "a.yaml, b.yml)")
    assert not (tmp_path / "out").exists()


def test_iterations_that_are_no_count_name_the_key_and_the_limit(tmp_path, capsys):
    for value in ("1.0e300", "1.0e+300", "2.5"):
        path = tmp_path / "spec.yaml"
        path.write_text(f"name: s\ndatasets: [synthetic]\noptimizers: [random]\n"
                        f"limits: {{iterations: {value}}}\n")
        assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
        err = one_line_error(capsys, "limits.iterations: ", "is not a whole number of "
                             "evaluations from 1 to 1,000,000,000")
        assert "unable to parse" not in err.lower()


def test_datasets_list_and_show_give_each_constraint_its_unit(capsys):
    assert main(["datasets", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("synthetic "))
    assert row.rstrip().endswith("accuracy>=0.85, time<=5330 s")
    assert main(["datasets", "show", "synthetic"]) == 0
    assert "constraints: accuracy>=0.85, time<=5330 s" in capsys.readouterr().out
