"""The view a sweep's address opens in MLflow's UI: its seed runs, one row each, with the
board's numbers as columns (``runs_page`` prints the address).

MLflow 3.17's runs page reads its search from the address (filter and order) but its columns
only from the browser's own saved state or from a *shared view*: an experiment tag
``mlflow.sharedViewState.<key>`` holding the view as JSON, opened by the address parameter
``viewStateShareKey=<key>`` (what the page's "Share" button writes and links to). Every sweep's
experiment carries one (``SEED_RUNS_VIEW``, ``mlflow_connection.Connection``): the seed runs
(``optfarm.kind = run``) without their variant and sweep runs (a collapsed parent row
otherwise stands for them all), ordered by ``quality_auc`` (lower is better for CNO and for
Accuracy_C alike), with the final quality, the cost to the metric's headline target
(``optfarm.farm.run.targets.HEADLINE``), the stop reason and the evaluations as columns;
MLflow shows only the columns some run has, so one view serves CNO and Accuracy_C sweeps. The
columns are narrow enough to show beside MLflow's assistant panel, which its UI opens by
itself the first time a browser opens a server on this machine (no address parameter or server
option keeps it closed; closed once, it stays closed: docs/guide/sweeps.md).
"""

from __future__ import annotations

import json

from optfarm.farm.run.targets import HEADLINE
from optfarm.farm.tracking.mlflow_mapping import STOP_REASON_TAG
from optfarm.farm.tracking.variants import metric_name

__all__ = ["SEED_RUNS_VIEW", "VIEW_COLUMNS", "VIEW_KEY", "VIEW_TAG"]

VIEW_KEY = "optfarm-seed-runs"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"


def _metric(name: str) -> str:
    """A metric's column as MLflow's runs table names it."""
    return f"metrics.`{name}`"


# column -> its width in pixels (a header shows in full, the row fits beside the assistant)
VIEW_COLUMNS = {
    **{_metric(f"final_{m}"): 100 for m in HEADLINE},
    **{_metric(f"cost_to_{metric_name(label)}"): 150 for label in HEADLINE.values()},
    f"tags.`{STOP_REASON_TAG}`": 140,
    _metric("n_evaluations"): 115,
}
SEED_RUNS_VIEW = json.dumps(
    {
        "searchFilter": "tags.`optfarm.kind` = 'run'",
        "orderByKey": _metric("quality_auc"),
        "orderByAsc": True,
        "selectedColumns": list(VIEW_COLUMNS),
        "columnOrder": list(VIEW_COLUMNS),
        "columnWidths": VIEW_COLUMNS,
    },
    sort_keys=True,
)
