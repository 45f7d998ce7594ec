"""A sweep's variant runs in MLflow (``optfarm.farm.tracking.variants``: one per dataset x
optimizer x parameters x problem), nested in the sweep's run, tagged with the sweep id and the
variant key.

A variant run spans its own seeds: created when its first seed run is logged, starting at the
earliest start of its seeds stored then (``open``), ended when its last seed is logged
(FINISHED, or FAILED when a seed failed) at that seed's end (``end_complete``); reopened when
a seed run is added to it later (the sweep extended, a failed seed run again). A stop ends each
one still open (``end_open``): KILLED while seeds are missing. Those that got a seed run (the
``news``) are due for statistics when the sweep ends.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from optfarm.farm.tracking.mlflow_connection import Connection
from optfarm.farm.tracking.mlflow_mapping import (
    RunContext,
    variant_run,
    variant_span,
    variant_status,
)

__all__ = ["VariantRuns", "members", "variant_filter"]


def variant_filter(sweep_id: str) -> str:
    """The search that finds the sweep's variant runs."""
    return f"tags.`optfarm.sweep_id` = '{sweep_id}' and tags.`optfarm.kind` = 'variant'"


def members(ctx: RunContext) -> dict[str, list[str]]:
    """variant key -> the run keys of its seeds."""
    out: dict[str, list[str]] = {}
    for key, v in ctx.layout.variant_of.items():
        out.setdefault(v, []).append(key)
    return out


class VariantRuns:
    """The variant runs of one sweep (the module docstring): ``runs``, variant key -> (run id,
    status) on the server; ``news``, the variants whose statistics are due."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self.runs: dict[str, tuple[str, str]] = {}
        self.news: set[str] = set()

    def find(self, ctx: RunContext, records: Mapping[str, dict]) -> None:
        """The sweep's variant runs by tag (``learn``)."""
        self.learn(ctx, records, self.conn.search(variant_filter(ctx.sweep_id)))

    def learn(self, ctx: RunContext, records: Mapping[str, dict], found: list) -> None:
        """Learn the variant runs ``found`` on the server (``records``: the sweep's stored
        runs); those left RUNNING (an interrupted sweep) or whose statistics miss finished
        seeds are due for statistics."""
        done: dict[str, int] = {}
        for key, v in ctx.layout.variant_of.items():
            if records.get(key, {}).get("status") == "done":
                done[v] = done.get(v, 0) + 1
        for r in found:
            v, status = r.data.tags["optfarm.variant_key"], r.info.status
            if v not in self.runs or status != "RUNNING":
                self.runs[v] = (r.info.run_id, status)
            if status == "RUNNING" or r.data.metrics.get("runs_done", 0) != done.get(v, 0):
                self.news.add(v)

    def open(
        self, ctx: RunContext, touched: set[str], spans: Mapping[str, tuple[int, int]], parent: str
    ) -> None:
        """Create the variant runs of ``touched`` that do not exist (RUNNING, starting at the
        earliest start of their seeds stored so far, ``spans``); reopen those ended before
        that now get a seed run (the sweep was extended, or a failed seed is run again)."""
        c, seeds = self.conn, members(ctx)
        new = []
        for v in sorted(touched):
            if v in self.runs:
                run_id, status = self.runs[v]
                if status != "RUNNING":
                    c.client.update_run(run_id, status="RUNNING")
                    self.runs[v] = (run_id, "RUNNING")
                continue
            start = variant_span(spans, seeds[v])[0]
            new.append(variant_run(ctx, v, parent, start))
        if c.write_runs is not None:
            c.write_runs(new)
            self.runs.update({r.key: (r.run_id, "RUNNING") for r in new})
            return
        for r in new:
            run_id = c.create_run(
                r.name,
                r.start_ms,
                {t.key: t.value for t in r.tags},
                variant_filter(ctx.sweep_id) + f" and tags.`optfarm.variant_key` = '{r.key}'",
            )
            c.client.log_batch(run_id, params=r.params)
            self.runs[r.key] = (run_id, "RUNNING")

    def end_complete(
        self,
        ctx: RunContext,
        touched: set[str],
        seeds: Mapping[str, tuple[str, str]],
        spans: Mapping[str, tuple[int, int]],
    ) -> None:
        """End the variant runs of ``touched`` whose seeds are all logged (``seeds``: run key
        -> (run id, status)), at the last one's end: FINISHED, or FAILED when one failed."""
        seeds_of = members(ctx)
        for v in sorted(touched):
            keys = seeds_of[v]
            logged = [seeds[k][1] for k in keys if k in seeds]
            if len(logged) < len(keys) or "RUNNING" in logged:
                continue
            run_id = self.runs[v][0]
            status = variant_status(len(keys), logged)
            self.conn.client.set_terminated(run_id, status, end_time=variant_span(spans, keys)[1])
            self.runs[v] = (run_id, status)

    def end_open(
        self,
        ctx: RunContext,
        seeds: Mapping[str, tuple[str, str]],
        spans: Mapping[str, tuple[int, int]],
    ) -> None:
        """End each variant run still open: at its last seed's end (now if none is stored),
        KILLED while seeds are missing, FAILED when one failed."""
        seeds_of = members(ctx)
        for v, (run_id, status) in sorted(self.runs.items()):
            if status != "RUNNING":
                continue
            keys = seeds_of.get(v, [])
            logged = [seeds[k][1] for k in keys if k in seeds]
            span = variant_span(spans, keys)
            end = span[1] if span else int(time.time() * 1000)
            status = variant_status(len(keys), logged)
            self.conn.client.set_terminated(run_id, status, end_time=end)
            self.runs[v] = (run_id, status)
