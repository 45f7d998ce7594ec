"""The leaderboard's page as a person meets it (issue 42): a finished one-table board opened in
a real headless Chromium, whose first screen shows the decision (at most 80 words, naming
random search), the start of its one picture, nothing wider than the window, and no "nan".

Needs Chromium and Playwright, as ``tests/farm/test_mlflow_ui.py`` does (skipped with the
reason without either). Set ``OPTFARM_SCREENSHOTS=DIR`` to keep the first screen as
``DIR/board-page.png`` (docs/results/board-page.png is one, docs/guide/leaderboard.md shows it).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from optfarm.farm.cli import main

from .test_mlflow_ui import browser  # noqa: F401  (Chromium, or skipped with the reason)

SPEC = """name: page-board
description: six optimizers on the synthetic job, 8 seeds
datasets: [synthetic]
optimizers: [random, lynceus, eic-usd, guindani, optuna-tpe, optuna-cmaes]
seeds: 8
board: {}
"""
NAN = re.compile(r"\bnan\b", re.IGNORECASE)
SCREENS = [(1400, 900), (1000, 760)]  # a laptop's window, and a narrower one
# elements of the page's flow whose right edge passes the window (the tables scroll inside
# their own box, display:block with overflow-x:auto, and are measured as that box)
OVERFLOWING = """() => Array.from(document.querySelectorAll('body > *, table'))
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)
  .map(e => e.tagName + ': ' + e.textContent.slice(0, 60))"""


def test_the_first_screen_shows_the_decision_and_nothing_overflows(
    browser,  # noqa: F811  (the fixture imported above)
    tmp_path,
    capsys,
):
    (tmp_path / "board.yaml").write_text(SPEC)
    out = tmp_path / "out"
    args = ["leaderboard", str(tmp_path / "board.yaml"), "--serial", "--no-tracking"]
    assert main([*args, "--no-progress", "--out", str(out), "--json"]) == 0
    decision = json.loads(capsys.readouterr().out)["boards"]["cno"]["decision"]
    assert len(decision.split()) <= 80 and "random search" in decision
    shots = Path(os.environ.get("OPTFARM_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    for width, height in SCREENS:
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.goto((out / "leaderboard" / "report.html").as_uri())
        lead = page.locator("p.lead")
        box = lead.bounding_box()
        assert lead.inner_text() == decision
        assert box["y"] >= 0 and box["y"] + box["height"] <= height  # all of it, unscrolled
        picture = page.locator("img").first.bounding_box()
        assert picture["y"] < height  # the picture starts on the first screen
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        assert page.evaluate(OVERFLOWING) == []
        body = page.inner_text("body")
        assert not NAN.search(body), NAN.search(body)
        if width == SCREENS[0][0]:
            page.screenshot(path=str(shots / "board-page.png"))
        context.close()
    assert (shots / "board-page.png").stat().st_size < 300_000
