"""``farm optimizers``: every optimizer with its parameters and defaults."""

from __future__ import annotations

from .console import EXIT_OK, print_table


def cmd_optimizers(args) -> int:
    from optimizers.base import describe
    from optimizers.registry import available, get

    for name in available():
        cls = get(name)
        print(f"{name}: {cls.summary}")
        rows = describe(cls)
        if rows:
            print_table(rows, ["name", "default", "allowed", "doc"])
        print()
    return EXIT_OK


def add_optimizers_command(sub) -> None:
    o = sub.add_parser("optimizers", help="list optimizers with their parameters")
    o.set_defaults(func=cmd_optimizers)
