"""``mlflow_runs.jsonl``, the output folder's cache of what a sweep logged to MLflow: one line
per run logged (its parent run, run key, run id and status) and one per end of the sweep (its
parent run and status), each with the tracking URI (without its password) and the sweep id.

Append-only. A resumed sweep whose runs are all logged, and whose last invocation ended
FINISHED, does not open MLflow at all (a finished 20,000-run sweep resumes in the time it takes
without tracking); with runs to log it asks the server nothing per run it finds here. It is
never the truth: a moved folder, another URI or a damaged line sends the tracker to the server.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from optfarm.farm.tracking.uris import hide_password

__all__ = ["CACHE", "RunCache"]

CACHE = "mlflow_runs.jsonl"


class RunCache:
    """The cache of the sweep ``sweep_id`` in ``folder`` for the tracking URI ``uri``."""

    def __init__(self, folder: Path, uri: str, sweep_id: str):
        self.path = folder / CACHE
        self.uri, self.sweep_id = hide_password(uri), sweep_id  # the URI as the lines keep it
        self.entries: list[dict] = []

    def read(self) -> None:
        """Read the lines written so far; damaged ones are left out, with one warning."""
        if not self.path.exists():
            return
        out, bad = [], 0
        for line in self.path.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
                if "key" in entry:
                    (entry["parent"], entry["run"], entry["status"])  # the fields it must have
                elif "closed" not in entry:
                    raise KeyError("closed")
                out.append(entry)
            except (ValueError, KeyError, TypeError):
                bad += 1
        if bad:
            print(
                f"farm: warning: {self.path}: {bad} damaged line(s) ignored (a cache: the "
                "tracking server is searched instead)",
                file=sys.stderr,
            )
        self.entries = out

    def runs_of(self, parent: str) -> dict[str, tuple[str, str]]:
        """run key -> (run id, status) of the runs logged under the sweep run ``parent`` (run
        ids are unique: its lines are its own)."""
        return {
            e["key"]: (e["run"], e["status"])
            for e in self.entries
            if "key" in e and e["parent"] == parent
        }

    def last_parent(self) -> str | None:
        """The sweep's run that the last line here logged to, if any."""
        mine = [
            e for e in self.entries if e.get("uri") == self.uri and e.get("sweep") == self.sweep_id
        ]
        return mine[-1]["parent"] if mine else None

    def without_strays(self, parent: str) -> bool:
        """Whether the last invocation that ended the sweep's run ``parent`` here left no
        stray (``optfarm.farm.tracking.strays``): every create it made was answered, or it
        deleted the strays after. Older versions' ends cannot say."""
        ends = [e for e in self.entries if "closed" in e and e.get("parent") == parent]
        return bool(ends) and ends[-1].get("strays") == 0

    def finished_parent(self, specs: Mapping[str, dict], records: Mapping[str, dict]) -> str | None:
        """The sweep's run when its last invocation here ended FINISHED and every run of
        ``specs`` is stored done (``records``) and logged FINISHED under it; else None."""
        ends = [
            e
            for e in self.entries
            if "closed" in e and e.get("uri") == self.uri and e.get("sweep") == self.sweep_id
        ]
        if not ends or ends[-1]["closed"] != "FINISHED" or ends[-1].get("strays") != 0:
            return None
        parent = ends[-1]["parent"]
        logged = self.runs_of(parent)
        if all(
            records.get(k, {}).get("status") == "done" and logged.get(k, ("", ""))[1] == "FINISHED"
            for k in specs
        ):
            return parent
        return None

    def append(self, entries: list[dict]) -> None:
        """Add ``entries`` (best effort: a cache)."""
        now = time.time()
        lines = "".join(
            json.dumps({"uri": self.uri, "sweep": self.sweep_id, **e, "logged_at": now}) + "\n"
            for e in entries
        )
        try:
            with open(self.path, "a") as f:
                f.write(lines)
        except OSError:
            pass  # a cache: the server is searched when it is incomplete
