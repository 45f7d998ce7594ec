"""The MLflow UI, as a user meets it: a tracked sweep opened in a fresh headless Chromium at the
address `farm sweep` prints lands on the experiment's seed runs, one row each with the board's
numbers as columns (final CNO, cost to the headline target, stop reason; the shared view of
``optfarm.farm.tracking.runs_view``), not on MLflow 3.17's GenAI overview (which the
experiment-kind tag alone no longer prevents: the UI follows the browser's workflow type,
``optfarm.farm.tracking.mlflow_connection``) nor on one collapsed sweep row; the columns show
in full on a 1600-pixel screen beside MLflow's assistant panel, which its UI opens by itself.

Needs Chromium (Debian's ``chromium``: ``apt-get install chromium``; ``.ci/run`` installs it)
and Playwright's Python driver (the ``test`` extra); without either the test is skipped with
the reason. Set ``OPTFARM_SCREENSHOTS=DIR`` to keep the screenshots.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from optfarm.farm.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Chromium as this machine's network wants it: no sandbox (root), no calls home
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SPEC = """name: ui-check
description: random search against Lynceus (look-ahead 1) on the synthetic job
datasets: [synthetic]
optimizers:
  - random
  - {name: lynceus, params: {la: 1}}
seeds: 2
limits: {iterations: 4}
"""
GENAI_ONLY = ("Judges", "Prompts", "Agent versions")  # the GenAI overview's sidebar


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (pip install -e '.[test]')"
    )
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _open(browser, url: str, shot: Path, wait_for: re.Pattern | None):
    """The page at ``url`` in a fresh browser context (no saved workflow type) on a 1600 x 900
    screen, once ``wait_for`` shows (or after 20 s without it); its screenshot in ``shot``."""
    context = browser.new_context(viewport={"width": 1600, "height": 900})
    page = context.new_page()
    page.goto(url, timeout=180_000)  # a loaded machine: 30 s ran out at load 33-41
    try:
        if wait_for is not None:
            page.get_by_text(wait_for).first.wait_for(timeout=180_000)  # a loaded machine
        else:
            page.wait_for_timeout(20_000)
    finally:
        page.screenshot(path=str(shot))
    return context, page


def _right_edge(page) -> float:
    """Where the runs table's room ends: the assistant panel's left edge when it is open,
    else the screen's."""
    panel = page.get_by_text("MLflow Assistant", exact=True)
    if panel.count() and panel.first.is_visible():
        return panel.first.bounding_box()["x"]
    return page.viewport_size["width"]


def test_the_printed_address_opens_the_seed_runs_with_the_boards_columns(
    server, browser, tmp_path, capsys
):
    from mlflow.tracking import MlflowClient

    from optfarm.farm.tracking.runs_view import SEED_RUNS_VIEW, VIEW_TAG

    spec = tmp_path / "ui-check.yaml"
    spec.write_text(SPEC)
    assert (
        main(
            [
                "sweep",
                str(spec),
                "--serial",
                "--no-progress",
                "--out",
                str(tmp_path / "o"),
                "--tracking-uri",
                server.url,
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    url = re.search(r"  to look: open (\S+)", printed).group(1)
    assert url.startswith(server.url)
    assert url.endswith("/runs?workflowType=machine_learning&viewStateShareKey=optfarm-seed-runs")

    exp = MlflowClient(server.url).get_experiment_by_name("ui-check")
    assert exp.tags["mlflow.note.content"].startswith("random search against Lynceus")
    assert exp.tags[VIEW_TAG] == SEED_RUNS_VIEW
    seeds = MlflowClient(server.url).search_runs([exp.experiment_id], "tags.`optfarm.kind` = 'run'")
    assert len(seeds) == 4 and all("final_cno_capped" in r.data.metrics for r in seeds)
    assert {r.data.params.get("opt.la") for r in seeds} == {None, "1"}
    reasons = {r.data.tags["optfarm.stop_reason"] for r in seeds}
    assert reasons <= {"iterations", "converged", "budget"} and reasons

    shots = Path(os.environ.get("OPTFARM_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    # the seed runs, one row each (not the sweep's run with its 2 variants and 4 seeds nested)
    context, page = _open(browser, url, shots / "mlflow-runs.png", re.compile(r"4 matching runs"))
    page.locator("[role=row]", has_text="s0 · random · synthetic").first.wait_for(timeout=180_000)
    page.screenshot(path=str(shots / "mlflow-runs.png"))
    body = page.inner_text("body")
    assert "Model training" in body and not [word for word in GENAI_ONLY if word in body]
    assert page.locator("[role=row]", has_text="ui-check").count() == 0  # no sweep row
    assert page.locator("[role=row]", has_text="s1 · lynceus la=1 · synthetic").count() == 1
    # the board's columns, each header in full on the screen, left of the assistant panel
    room = _right_edge(page)
    for header in ("final_cno", "cost_to_cno_le_1.1", "optfarm.stop_reason", "n_evaluations"):
        cell = page.locator("[role=columnheader]", has_text=header).first
        box = cell.bounding_box()
        assert box is not None and box["x"] + box["width"] <= room, (header, box, room)
    assert any(reason in body for reason in reasons)
    context.close()

    # the same experiment without the workflow type: MLflow 3.17 opens its GenAI overview
    plain = url.split("/runs?")[0]
    context, page = _open(browser, plain, shots / "mlflow-plain.png", None)
    body = page.inner_text("body")
    assert "matching runs" not in body and any(word in body for word in GENAI_ONLY)
    context.close()
