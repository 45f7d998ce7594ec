"""Every Python block of README.md and docs/guide/*.md runs (issue 43), on the built-in synthetic
job by the convention docs/guide/ask-tell.md states: a block that uses ``space``, ``problem``
or ``run_my_job`` without defining them gets the synthetic job's
(``tests/integrations/synthetic_job.py``: ``doc_space_problem``, ``run_my_job``), and the blocks
of one page run in order in one namespace. A block that imports Ray runs on the tests' local
Ray on 127.0.0.1. No block is skipped: a page whose block fails fails here, naming the block."""

from __future__ import annotations

import re
import traceback
from pathlib import Path

import pytest

from tests.farm.conftest import ray_local  # noqa: F401  (a fixture, asked for by name)
from tests.integrations.synthetic_job import doc_space_problem, run_my_job

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(page: Path) -> list[str]:
    return BLOCK.findall(page.read_text())


WITH_BLOCKS = [p for p in PAGES if python_blocks(p)]


def test_the_pages_with_python_blocks_are_found():
    names = {p.name for p in WITH_BLOCKS}
    assert {"README.md", "ask-tell.md"} <= names, names


@pytest.mark.parametrize("page", WITH_BLOCKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_block_runs_on_the_synthetic_job(page, request, capsys):
    blocks = python_blocks(page)
    if any(re.search(r"^(from|import) ray\b", b, re.M) for b in blocks):
        request.getfixturevalue("ray_local")
    space, problem = doc_space_problem()
    namespace = {
        "__name__": "doc_block",  # not importable: Ray pickles the blocks' functions by value
        "space": space,
        "problem": problem,
        "run_my_job": run_my_job,
    }
    where = page.relative_to(ROOT)
    for i, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"{where} (Python block {i})", "exec"), namespace)
        except Exception:
            pytest.fail(f"{where}: Python block {i} failed:\n{traceback.format_exc(limit=-3)}")
    assert "opt" in namespace or "sampler" in namespace  # an example that ran an optimizer
    assert capsys.readouterr().out.strip()  # and printed its recommendation
