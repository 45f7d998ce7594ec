"""The layers of ARCHITECTURE.md ("Layers"), held: every import of the four packages, those
inside functions included, read with ``ast``; an import that runs back up fails the test with
its file, line and the two layers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "optfarm"
PACKAGES = ("oracle", "optimizers", "farm", "integrations")

# the top layers: a package imports only packages of a lower rank (equal ranks: neither way)
PACKAGE_RANK = {"oracle": 0, "optimizers": 1, "farm": 2, "integrations": 2}
# farm's rooms, in the same sense; farm's own top-level modules (__main__) are the entry point
ROOM_RANK = {
    "run": 0,
    "store": 1,
    "stats": 1,
    "tracking": 2,
    "runtime": 2,
    "sweep": 3,
    "report": 4,
    "board": 5,
    "gate": 5,
    "bench": 6,
    "cluster": 6,
    "cli": 7,
}
ENTRY_RANK = 8


def module_name(path: Path, root: Path) -> str:
    """The dotted name of ``path`` under ``root`` (``optfarm.farm.run.loop``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(tree: ast.Module, module: str, is_package: bool):
    """(line, dotted name) of every import in ``tree``, relative imports resolved; for
    ``from X import a`` both ``X`` and ``X.a`` (``a`` may be a module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".") if is_package else module.split(".")[:-1]
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def layer(module: str) -> tuple[str, int] | None:
    """(label, rank) of the layer ``module`` belongs to, for comparing two modules of one
    package (farm's rooms) or of two packages (the top layers); None outside the packages."""
    parts = module.split(".")
    if parts[0] != NAMESPACE or len(parts) < 2 or parts[1] not in PACKAGE_RANK:
        return None
    return parts[1], PACKAGE_RANK[parts[1]]


def room(module: str) -> tuple[str, int] | None:
    """(label, rank) of the farm room of ``module`` (an ``optfarm.farm.*`` module), else None."""
    parts = module.split(".")
    if parts[:2] != [NAMESPACE, "farm"] or len(parts) < 3:
        return None
    if parts[2] in ROOM_RANK:
        return f"farm/{parts[2]}", ROOM_RANK[parts[2]]
    return f"farm/{parts[2]}.py", ENTRY_RANK


def back_arrows(root: Path, packages=PACKAGES) -> dict[str, str]:
    """Every import statement under ``root``'s ``packages`` that runs up or sideways between
    layers or farm rooms: ``{"file:line": "A imports B (a -> b: up)"}``."""
    found = {}
    for package in packages:
        for path in sorted((root / NAMESPACE / package).rglob("*.py")):
            module = module_name(path, root)
            tree = ast.parse(path.read_text(), filename=str(path))
            for line, target in imported_modules(tree, module, path.name == "__init__.py"):
                where = f"{path.relative_to(root)}:{line}"
                for rank_of in (layer, room):
                    here, there = rank_of(module), rank_of(target)
                    if (
                        where in found
                        or here is None
                        or there is None
                        or here[0] == there[0]
                        or there[1] < here[1]
                    ):
                        continue
                    found[where] = (
                        f"{module} imports {target} ({here[0]} -> {there[0]}: "
                        f"{'up' if there[1] > here[1] else 'sideways'})"
                    )
    return found


def test_no_import_runs_back_up_the_layers():
    wrong = [f"{w}: {a}" for w, a in sorted(back_arrows(REPO).items())]
    assert not wrong, "imports against ARCHITECTURE.md's layers:\n  " + "\n  ".join(wrong)


def test_the_layers_cover_every_room_of_farm():
    rooms = {
        p.name
        for p in (REPO / NAMESPACE / "farm").iterdir()
        if p.is_dir() and (p / "__init__.py").exists()
    }
    assert rooms == set(ROOM_RANK), "a new room of optfarm/farm/ needs its place in ROOM_RANK"


@pytest.mark.parametrize(
    "where, source, expected",
    [
        (
            "optfarm/farm/run/planted.py",
            "def f():\n    from optfarm.farm.report import analysis\n",
            "farm/run -> farm/report: up",
        ),
        (
            "optfarm/farm/bench/planted.py",
            "from optfarm.farm.cluster.local import up\n",
            "farm/bench -> farm/cluster: sideways",
        ),
        (
            "optfarm/oracle/planted.py",
            "import optfarm.optimizers.base\n",
            "oracle -> optimizers: up",
        ),
        (
            "optfarm/farm/run/planted.py",
            "from optfarm.integrations import ray_tune\n",
            "farm -> integrations: sideways",
        ),
    ],
)
def test_a_planted_back_arrow_is_found(tmp_path, where, source, expected):
    for package in PACKAGES:
        (tmp_path / NAMESPACE / package).mkdir(parents=True)
    path = tmp_path / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    arrows = back_arrows(tmp_path)
    assert list(arrows) == [f"{where}:{source.count(chr(10))}"]
    assert expected in next(iter(arrows.values()))


# -- optimizers/ and the runtime libraries (ARCHITECTURE.md, "Layers") --------------------------
NEVER_IN_OPTIMIZERS = ("ray", "mlflow")  # not even inside a function
PEER_LIBRARIES = ("optuna", "smac", "ConfigSpace", "cmaes", "torch")  # the peers', lazily


def library_imports(root: Path) -> list[str]:
    """Every import under ``root``/optfarm/optimizers of Ray or MLflow, and of a peer library at
    module level or outside ``optimizers/peers/``: ``file:line: name (why)``."""
    found = []
    for path in sorted((root / NAMESPACE / "optimizers").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        top_level = {id(node) for node in tree.body}
        peers = path.relative_to(root).parts[:3] == (NAMESPACE, "optimizers", "peers")
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                why = (
                    "optimizers/ never imports it"
                    if top in NEVER_IN_OPTIMIZERS
                    else "a peer library outside the peers' lazy imports"
                    if top in PEER_LIBRARIES and (id(node) in top_level or not peers)
                    else None
                )
                if why:
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {name} ({why})")
    return found


def test_optimizers_import_no_runtime_library_and_peers_import_theirs_lazily():
    wrong = library_imports(REPO)
    assert not wrong, "imports against ARCHITECTURE.md's layers:\n  " + "\n  ".join(wrong)


@pytest.mark.parametrize(
    "where, source",
    [
        ("optfarm/optimizers/planted.py", "def f():\n    import ray\n"),
        ("optfarm/optimizers/peers/planted.py", "from mlflow.entities import Metric\n"),
        ("optfarm/optimizers/peers/planted.py", "import optuna\n"),
        ("optfarm/optimizers/models/planted.py", "def f():\n    from smac import Scenario\n"),
    ],
)
def test_a_planted_library_import_is_found(tmp_path, where, source):
    path = tmp_path / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    assert [w.split(": ")[0] for w in library_imports(tmp_path)] == [
        f"{where}:{source.count(chr(10))}"
    ]
