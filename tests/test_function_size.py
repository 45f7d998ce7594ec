"""Functions a reader can hold (ARCHITECTURE.md, "Habits", 12): no function or method in
``optfarm/farm/``, ``optfarm/optimizers/`` or ``optfarm/oracle/`` longer than 60 lines or of a
cyclomatic complexity above 15, measured by radon as ``radon cc optfarm/farm`` prints it (numba
kernels included: a long kernel is a short one calling named kernels; ARCHITECTURE.md says
which steps cost nothing in a hot loop). A failure names each function with its file, line,
length and complexity; split it into named steps."""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_visit

REPO = Path(__file__).resolve().parents[1]
MAX_LINES, MAX_COMPLEXITY = 60, 15
PACKAGES = ("farm", "optimizers", "oracle")


def blocks(path: Path) -> dict[tuple[int, str], object]:
    """Every function and method radon finds in ``path``, nested ones included (radon lists
    a method both alone and in its class)."""
    found, todo = {}, list(cc_visit(path.read_text()))
    while todo:
        block = todo.pop()
        todo.extend(getattr(block, "methods", []))
        todo.extend(getattr(block, "closures", []))
        if not hasattr(block, "methods"):  # not a class
            found[block.lineno, block.fullname] = block
    return found


def too_big() -> list[str]:
    found = []
    for path in sorted(p for pkg in PACKAGES for p in (REPO / "optfarm" / pkg).rglob("*.py")):
        for block in blocks(path).values():
            lines = block.endline - block.lineno + 1
            if lines > MAX_LINES or block.complexity > MAX_COMPLEXITY:
                found.append(
                    f"{path.relative_to(REPO)}:{block.lineno} {block.fullname}: "
                    f"{lines} lines, complexity {block.complexity}"
                )
    return found


def test_no_function_is_longer_than_60_lines_or_more_complex_than_15():
    found = too_big()
    assert not found, "\n".join(found)
