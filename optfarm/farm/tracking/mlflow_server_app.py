"""optfarm's MLflow app: ``mlflow server --app-name optfarm ...`` is MLflow's own tracking
server with one more endpoint, so that a sweep tracked through a team's server costs what one
tracked into a database costs (docs/guide/sweeps.md, "MLflow for a team").

``ENDPOINT`` (``optfarm.farm.tracking.mlflow_bulk``):
- ``GET``: ``{"mlflow": version, "writable": bool}``; writable when the server's tracking store
  is a database that ``mlflow_bulk`` writes (``store_of``).
- ``POST {"experiment_id": id, "runs": [...]}`` (``runs_to_json``): the runs created complete
  in one transaction of the server's store (``write_runs``), in the experiment's own artifact
  location; runs whose id exists already are left as they are, so a request retried after its
  answer was lost writes nothing twice. Refused: an experiment that is not active (404 / 400),
  malformed runs (400), a store ``mlflow_bulk`` cannot write (501).

Everything else is MLflow's server, unchanged: its Flask app (``mlflow.server.app``) with this
route added, wrapped in MLflow's FastAPI app when ``mlflow server`` runs it under uvicorn (as
MLflow's own ``basic-auth`` app does). Registered as the ``mlflow.app`` entry point ``optfarm``
(pyproject.toml). It cannot be combined with ``basic-auth`` (one app per server): a server that
needs MLflow's authentication keeps the client path.
"""

from __future__ import annotations

__all__ = ["create_app"]


def create_app(app=None):
    """MLflow's server app with optfarm's endpoint (the factory ``mlflow server`` calls)."""
    from mlflow.server import app as mlflow_app
    from mlflow.server.handlers import catch_mlflow_exception

    from optfarm.farm.tracking.mlflow_bulk import ENDPOINT
    from optfarm.farm.tracking.mlflow_private import served_by_uvicorn

    app = mlflow_app if app is None else app
    app.add_url_rule(
        ENDPOINT,
        "optfarm_create_runs",
        catch_mlflow_exception(_create_runs),
        methods=["GET", "POST"],
    )
    if served_by_uvicorn():
        from mlflow.server.fastapi_app import create_fastapi_app

        return create_fastapi_app(app)
    return app


def _create_runs():
    import mlflow
    from flask import jsonify, request
    from mlflow.entities.lifecycle_stage import LifecycleStage
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE, NOT_IMPLEMENTED

    from optfarm.farm.tracking.mlflow_bulk import runs_from_json, store_of, write_runs
    from optfarm.farm.tracking.mlflow_private import server_store, table_models

    SqlRun = table_models()["SqlRun"]
    store = store_of(server_store())
    if request.method == "GET":
        return jsonify({"mlflow": mlflow.__version__, "writable": store is not None})
    if store is None:
        raise MlflowException(
            "this server's tracking store is not one optfarm writes in bulk",
            error_code=NOT_IMPLEMENTED,
        )
    body = request.get_json(silent=True) or {}
    try:
        experiment_id = str(body["experiment_id"])
        runs = runs_from_json(body["runs"])
    except (KeyError, TypeError, ValueError) as e:
        raise MlflowException(
            f"malformed runs: {type(e).__name__}: {e}", error_code=INVALID_PARAMETER_VALUE
        ) from None
    experiment = store.get_experiment(experiment_id)  # RESOURCE_DOES_NOT_EXIST: 404
    if experiment.lifecycle_stage != LifecycleStage.ACTIVE:
        raise MlflowException(
            f"experiment {experiment_id} is deleted", error_code=INVALID_PARAMETER_VALUE
        )
    with store.ManagedSessionMaker(read_only=False) as session:  # the primary, not a replica
        ids = [r.run_id for r in runs]
        have = (
            {row[0] for row in session.query(SqlRun.run_uuid).filter(SqlRun.run_uuid.in_(ids))}
            if ids
            else set()
        )
    new = [r for r in runs if r.run_id not in have]
    write_runs(store, experiment_id, experiment.artifact_location, new)
    return jsonify({"created": len(new), "existing": len(runs) - len(new)})
