"""``farm datasets list|show|import|fetch``."""

from __future__ import annotations

import json
import sys
import time

from .console import EXIT_OK, json_default, print_json, print_table


def cmd_datasets_list(args) -> int:
    from optfarm.oracle.registry import available, load

    rows, shown = [], {}  # shown: name -> its constraints with their units
    for name in available():
        t0 = time.perf_counter()
        d = load(name)
        load_s = time.perf_counter() - t0
        rows.append(
            {
                "name": name,
                "rows": d.table.num_rows,
                "configs": d.space().n_configs,
                "fidelities": len(d.fidelities),
                "objective": str(d.meta.problem.objective),
                "constraints": [str(c) for c in d.meta.problem.constraints],
                "load_s": round(load_s, 4),
            }
        )
        shown[name] = ", ".join(c.shown(d.meta.cost_unit) for c in d.meta.problem.constraints)
    from optfarm.oracle.sources import SOURCES

    missing = sorted(set(SOURCES) - {r["name"] for r in rows})
    if args.json:
        print_json({"datasets": rows, "not_fetched": missing})
        return EXIT_OK
    for r in rows:
        r["constraints"], r["load_s"] = shown[r["name"]], f"{r['load_s']:.4f}"
    print_table(
        rows,
        ["name", "rows", "configs", "fidelities", "objective"]
        + (["load_s"] if args.timing else [])
        + ["constraints"],
    )
    if missing:
        print(
            f"\nnot fetched yet ({len(missing)}): {', '.join(missing)}\n"
            "get them with `farm datasets fetch NAME` or `farm datasets import FORMAT --from PATH`"
        )
    return EXIT_OK


def cmd_datasets_show(args) -> int:
    from optfarm.oracle.oracle import Oracle
    from optfarm.oracle.registry import load

    dataset = load(args.name)
    info = Oracle(dataset).summary()
    if args.json:
        print(json.dumps(info, default=json_default))
        return EXIT_OK
    for k, v in info.items():
        if k == "constraints":
            v = ", ".join(c.shown(dataset.meta.cost_unit) for c in dataset.meta.problem.constraints)
        elif k == "dimensions":
            v = "; ".join(f"{d['name']} ({d['kind']}): {d['values']}" for d in v)
        print(f"{k:>16}: {v}")
    return EXIT_OK


def cmd_datasets_import(args) -> int:
    from optfarm.oracle.registry import data_dir, import_datasets

    options = {"name": args.name} if args.name else {}
    if args.description:
        options["description"] = args.description
    datasets = import_datasets(args.format, args.source, force=args.force, **options)
    from optfarm.oracle.oracle import Oracle

    for d in datasets:
        print(f"imported {d.name}: {d.table.num_rows} rows -> {data_dir() / (d.name + '.parquet')}")
        oracle = Oracle(d)
        for line in [*oracle.constraint_report(), *oracle.spread_report()]:
            print(f"  {line}", file=sys.stderr if line.startswith("warning") else sys.stdout)
    return EXIT_OK


def cmd_datasets_fetch(args) -> int:
    from optfarm.oracle.sources import fetch

    shown = []

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty():
            print(f"\rdownloading file {done + 1} of {total}", end="", file=sys.stderr, flush=True)
            shown.append(done)

    try:
        names = fetch(args.names, from_dir=args.from_dir, progress=progress)
    finally:
        if shown:
            print(file=sys.stderr)
    for n in names:
        print(f"fetched {n}")
    return EXIT_OK


def add_datasets_commands(sub) -> None:
    d = sub.add_parser("datasets", help="list, show, import and fetch datasets")
    dsub = d.add_subparsers(dest="datasets_command", required=True)
    dl = dsub.add_parser("list", help="datasets available now")
    dl.add_argument(
        "--timing",
        action="store_true",
        help="also print the time to load each dataset from its Parquet file",
    )
    dl.add_argument("--json", action="store_true", help="print one JSON object")
    dl.set_defaults(func=cmd_datasets_list)
    ds = dsub.add_parser("show", help="one dataset's facts")
    ds.add_argument("name")
    ds.add_argument("--json", action="store_true")
    ds.set_defaults(func=cmd_datasets_show)
    di = dsub.add_parser("import", help="import a dataset from a public format or a table")
    di.add_argument("format", help="trimtuner, lynceus, cherrypick, scout, guindani or csv")
    di.add_argument("--from", dest="source", required=True, metavar="PATH")
    di.add_argument("--name", help="dataset name (formats that yield one dataset)")
    di.add_argument(
        "--force",
        action="store_true",
        help="replace a cached dataset of the same name whose content differs",
    )
    di.add_argument(
        "--description", metavar="YAML", help="csv format: the YAML file describing the table"
    )
    di.set_defaults(func=cmd_datasets_import)
    df = dsub.add_parser("fetch", help="download public datasets into the cache")
    df.add_argument("names", nargs="+", help="dataset names, or 'all'")
    df.add_argument(
        "--from",
        dest="from_dir",
        metavar="DIR",
        help="take the files from a local copy instead of downloading",
    )
    df.set_defaults(func=cmd_datasets_fetch)
