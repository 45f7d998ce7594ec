"""numba stamps a cached kernel with its own file only: a kernel that inlines a kernel of
another file loads its stale machine code after that file changed. The look-ahead's kernels
inline the tree kernels (issue 43 split them into two files), so they are stamped with the
tree kernels' file too (``optfarm.optimizers.numba_private.stamp_with``). Shown on two small
modules in a fresh cache: without the stamp the caller returns the old value, with it the new.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

CALLEE = "import numba\n\n@numba.njit(cache=True)\ndef f():\n    return {value}\n"
CALLER = textwrap.dedent(
    """\
    import sys

    import numba

    import callee
    from optfarm.optimizers.numba_private import kernels_of, stamp_with


    @numba.njit(cache=True)
    def g():
        return callee.f()


    if {stamp}:
        stamp_with(kernels_of(sys.modules[__name__]), callee.__file__)
    """
)


def _caller_returns(folder: Path) -> str:
    import optfarm

    path = os.pathsep.join([str(folder), str(Path(optfarm.__file__).parents[1])])
    env = {**os.environ, "NUMBA_CACHE_DIR": str(folder / "cache"), "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", "import caller; print(caller.g())"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return done.stdout.strip()


def _after_the_callee_changes(folder: Path, stamp: bool) -> tuple[str, str]:
    folder.mkdir()
    (folder / "callee.py").write_text(CALLEE.format(value=1))
    (folder / "caller.py").write_text(CALLER.format(stamp=stamp))
    first = _caller_returns(folder)
    (folder / "callee.py").write_text(CALLEE.format(value=22))  # another size: another stamp
    return first, _caller_returns(folder)


def test_a_stamped_kernel_compiles_again_when_the_file_it_inlines_changes(tmp_path):
    assert _after_the_callee_changes(tmp_path / "unstamped", stamp=False) == ("1", "1")  # stale
    assert _after_the_callee_changes(tmp_path / "stamped", stamp=True) == ("1", "22")


def test_the_lookahead_kernels_are_stamped_with_the_tree_kernels_file():
    from optfarm.optimizers import lookahead_kernels
    from optfarm.optimizers.models import tree_kernels
    from optfarm.optimizers.numba_private import kernels_of

    st = os.stat(tree_kernels.__file__)
    kernels = kernels_of(lookahead_kernels)
    assert len(kernels) >= 10
    for kernel in kernels:
        stamp = kernel._cache._cache_file._source_stamp
        assert stamp[1] == ((st.st_mtime, st.st_size),), kernel.py_func.__name__
