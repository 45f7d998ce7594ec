"""``farm optimizers [NAME]``: every optimizer in one line each, or one optimizer's
parameters with their defaults and allowed values (what ``--param`` takes)."""

from __future__ import annotations

from .console import EXIT_OK, UsageError, print_json, print_table


def _entry(name: str) -> dict:
    from optfarm.optimizers.base import describe
    from optfarm.optimizers.registry import get

    cls = get(name)
    return {"name": name, "summary": cls.summary, "params": describe(cls)}


def cmd_optimizers(args) -> int:
    from optfarm.optimizers.registry import OPTIMIZERS, available
    from optfarm.oracle.spelling import did_you_mean

    if args.name is not None:
        if args.name not in OPTIMIZERS:
            raise UsageError(
                f"unknown optimizer {args.name!r}"
                f"{did_you_mean(args.name, OPTIMIZERS)} (`farm optimizers` "
                "lists them)"
            )
        entry = _entry(args.name)
        if args.json:
            print_json(entry)
            return EXIT_OK
        print(f"{entry['name']}: {entry['summary']}")
        print_table(entry["params"], ["name", "default", "allowed", "doc"])
        print(f"\nset one with `farm run --optimizer {args.name} --param NAME=VALUE`")
        return EXIT_OK
    entries = [_entry(name) for name in available()]
    if args.json:
        print_json({"optimizers": entries})
        return EXIT_OK
    print_table(
        [
            {"name": e["name"], "parameters": len(e["params"]), "what": e["summary"]}
            for e in entries
        ],
        ["name", "parameters", "what"],
    )
    print("\n`farm optimizers NAME` shows one optimizer's parameters, defaults and allowed values")
    return EXIT_OK


def add_optimizers_command(sub) -> None:
    o = sub.add_parser("optimizers", help="list optimizers, or one optimizer's parameters")
    o.add_argument("name", nargs="?", help="one optimizer: its full parameter table")
    o.add_argument("--json", action="store_true", help="print one JSON object")
    o.set_defaults(func=cmd_optimizers)
