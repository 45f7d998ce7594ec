"""One home for every quantity the farm defines (issue 35): each row names a quantity, the
module(s) it lives in, and how a second definition looks in source; the test reads every module
of the four packages and fails on a second definition outside its home, naming file, line and
the home to import from. Each row carries an example of a second definition, which the scanner
must catch (so a row whose pattern went stale fails too).

Two kinds of patterns: ``literal`` matches string constants in code (f-string parts included,
docstrings and comments left out: prose may name a target), ``code`` matches the source text.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("farm", "optimizers", "oracle", "integrations")


@dataclass(frozen=True)
class Home:
    quantity: str
    homes: tuple[str, ...]  # files (relative to the repository) that may define it
    kind: str  # "literal" or "code"
    pattern: str  # a regular expression searched in each literal / line
    example: str  # a second definition the pattern must catch
    allowed: dict[str, str] = field(default_factory=dict)  # other file -> why it may


ROWS = (
    Home(
        "reach-target labels (cno<=1.1, acc_c>=0.9opt)",
        ("optfarm/farm/run/targets.py",),
        "literal",
        r"\b(cno|acc_c)\s*[<>]=",
        'TARGET = "cno<=1.1"',
    ),
    Home(
        "reach-target words (CNO <= 1.1 as figures and farm run write it)",
        ("optfarm/farm/run/targets.py",),
        "literal",
        r"^(CNO ?<= ?[\d.]+|the optimum)$",
        'words = {"cno<=2": "CNO<=2"}',
    ),
    Home(
        "the run key and variant key recipe (sha256 of sorted JSON, 16 hex digits)",
        ("optfarm/farm/run/spec.py",),
        "code",
        r"hexdigest\(\)\s*\[\s*:\s*\d+\s*\]",
        "key = hashlib.sha256(text.encode()).hexdigest()[:16]",
    ),
    Home(
        "atomic writes (a temporary name, then a rename)",
        ("optfarm/oracle/atomic_files.py", "optfarm/farm/store/location.py"),
        "code",
        r"\bos\.(replace|rename)\(|\b(tmp|part|temp)\w*\.(replace|rename)\(|"
        r"tempfile\.(mkstemp|NamedTemporaryFile)|[\"']\.(tmp|part)[\"']",
        'tmp = path.with_suffix(".tmp")\ntmp.replace(path)',
        allowed={
            "optfarm/farm/tracking/mlflow_connection.py": "moves the sqlite store MLflow itself "
            "created and migrated, and sets a "
            "damaged one aside with its -wal/-shm files: renames of whole databases, "
            "not bytes the farm writes"
        },
    ),
    Home(
        "free ports on 127.0.0.1",
        ("optfarm/farm/runtime/ports.py",),
        "code",
        r"\.bind\(\s*\(",
        's.bind(("127.0.0.1", 0))',
    ),
    Home(
        "a dependency's private names (MLflow, Ray, Optuna)",
        (
            "optfarm/farm/tracking/mlflow_private.py",
            "optfarm/farm/runtime/ray_private.py",
            "optfarm/optimizers/peers/optuna_private.py",
        ),
        "code",
        r"\bray\._(raylet|private)\b|_tracking_client|_validate_(batch|param)|_get_tracking_store|"
        r"_MLFLOW_SGI_NAME|_engine_map|_CONSTRAINTS_KEY|\._storage\b|\._trial_id\b|_internal_kv|"
        r"_restore_optimizer",
        "from ray._raylet import GcsClient",
    ),
    Home(
        "the CNO score and its cap (log2 of a CNO, CNO_CAP = 16)",
        ("optfarm/farm/run/metrics.py",),
        "code",
        r"\blog2\(\s*(np\.)?(min|clip|max)?\(?\s*\w*cno|\b[A-Z_]*CNO_CAP\s*=",
        "score = math.log2(min(cno, 16.0))",
    ),
    Home(
        "the quality a score stands for (score_quality: CNO 2 ** score, 1 - score)",
        ("optfarm/farm/run/metrics.py",),
        "code",
        r"\b2(\.0)?\s*\*\*\s*\(?\s*(score|at|s)\b",
        'return 2.0**score if metric == "cno" else 1.0 - score',
    ),
    Home(
        "a table's mean configuration cost and price (true cost at s = 1 over its configurations)",
        ("optfarm/farm/run/metrics.py",),
        "code",
        r"true_cost\[\s*:\s*,\s*-1\s*\]",
        "unit = float(np.nanmean(oracle.true_cost[:, -1]))",
    ),
    Home(
        "the board's default budgets and their price cap",
        ("optfarm/farm/sweep/board_spec.py",),
        "code",
        r"\b(DEFAULT_COST_BUDGETS|DEFAULT_EVALUATIONS|PRICE_SHARE_CAP)\s*=",
        "DEFAULT_COST_BUDGETS = (2.0, 5.0, 10.0)",
    ),
    # child seeds: one home, optfarm/optimizers/seeds.py, held by tests/optimizers/test_seeds.py
)


def _literals(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string constant that is not a docstring."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def offences(row: Home, source: str) -> list[tuple[int, str]]:
    """(line, text) of each second definition of ``row``'s quantity in ``source``."""
    pattern = re.compile(row.pattern)
    if row.kind == "literal":
        return [(line, text) for line, text in _literals(ast.parse(source)) if pattern.search(text)]
    return [
        (i, line.strip())
        for i, line in enumerate(source.splitlines(), 1)
        if pattern.search(line.split("#")[0])
    ]


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / "optfarm" / package).rglob("*.py"))


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.quantity.split(" (")[0])
def test_a_quantity_is_defined_in_its_home_only(row):
    found = []
    for path in _modules():
        rel = path.relative_to(ROOT).as_posix()
        if rel in row.homes or rel in row.allowed:
            continue
        found += [f"{rel}:{line}: {text!r}" for line, text in offences(row, path.read_text())]
    assert not found, (
        f"{row.quantity} is defined again outside {', '.join(row.homes)} "
        "(import it from there):\n" + "\n".join(found)
    )


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.quantity.split(" (")[0])
def test_each_row_catches_its_example_and_its_home_holds_it(row):
    assert offences(row, row.example), f"the pattern of {row.quantity!r} misses its example"
    homes = [ROOT / h for h in row.homes]
    assert all(h.is_file() for h in homes), f"{row.quantity}: a home is missing"
    assert any(offences(row, h.read_text()) for h in homes), f"{row.quantity}: no home defines it"
    assert set(row.allowed).isdisjoint(row.homes) and all(row.allowed.values())
