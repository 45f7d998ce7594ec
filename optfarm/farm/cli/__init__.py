"""The ``farm`` command line: a module per command (``sweep`` holds ``farm sync`` too, the
upload of a sweep's runs, and ``bench`` holds ``farm bench-farm``), the helpers of one
command beside it (``run_summary``, ``leaderboard_plan``, ``bench_process``), shared console
helpers in ``console``.

Exit codes: 0 success; 1 a run or command failed; 2 bad input (unknown dataset, optimizer or
parameter, malformed file or spec, a problem the optimizer cannot pose), reported on one line
on stderr.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from .console import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, UsageError

__all__ = ["build_parser", "main", "run"]


def build_parser() -> argparse.ArgumentParser:
    from .bench import add_bench_commands
    from .cluster import add_cluster_commands
    from .datasets import add_datasets_commands
    from .leaderboard import add_leaderboard_command
    from .optimizers import add_optimizers_command
    from .regress import add_regress_command
    from .report import add_report_command
    from .run import add_run_command
    from .sweep import add_sweep_commands

    p = _Parser(
        prog="farm", description="optfarm: a benchmark farm for cloud-configuration optimizers"
    )
    sub = p.add_subparsers(dest="command", required=True)
    for add in (
        add_run_command,
        add_datasets_commands,
        add_optimizers_command,
        add_bench_commands,
        add_sweep_commands,
        add_report_command,
        add_regress_command,
        add_leaderboard_command,
        add_cluster_commands,
    ):
        add(sub)
    return p


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one line (``farm sweep: error: argument
    --seeds: invalid int value: '1e7'``), exit code 2, as every other bad input; ``--help``
    still shows the usage. Subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def main(argv: Sequence[str] | None = None) -> int:
    from optfarm.farm.run.checkpoint import CheckpointSettingError
    from optfarm.optimizers.base import ParameterError
    from optfarm.oracle.dataset import DatasetError
    from optfarm.oracle.problem import ProblemError

    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # `farm sweep` runs it again
    try:
        return args.func(args)
    except (UsageError, DatasetError, ParameterError, ProblemError, CheckpointSettingError) as e:
        print(f"farm: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # the reader went away (`farm ... | head`)
        sys.stdout = open(os.devnull, "w")
        return EXIT_OK
    except KeyboardInterrupt:
        print("farm: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # a crash: one line, exit 1; FARM_DEBUG=1 shows the traceback
        if os.environ.get("FARM_DEBUG"):
            raise
        print(f"farm: failed: {_first_line(e)}", file=sys.stderr)
        return EXIT_FAILED


def _first_line(e: Exception) -> str:
    """``Type: message`` on one line: a message of many lines (Ray's errors are paragraphs)
    is cut to its first, with where the rest is."""
    lines = str(e).strip().splitlines() or [""]
    more = " (more: FARM_DEBUG=1)" if len(lines) > 1 else ""
    return f"{type(e).__name__}: {lines[0]}{more}"


def run() -> NoReturn:
    """The ``farm`` executable: ``main``, then exit without the interpreter's last garbage
    collection of the whole heap (Ray, MLflow, pyarrow: about a second of CPU, 90% of what an
    interrupted sweep still has to do after SIGTERM, and minutes of wall time on a loaded
    machine). The heap is frozen instead: atexit handlers still run and everything is flushed
    and closed as usual; only objects left in reference cycles are not finalised, as the
    process is ending. A negative code -N (a watched sweep driver ended by signal N,
    ``optfarm.farm.runtime.driver``) ends this process by the same signal."""
    code = main()
    gc.freeze()
    if code < 0:
        sys.stdout.flush()
        sys.stderr.flush()
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # their handlers cannot be set
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    run()
