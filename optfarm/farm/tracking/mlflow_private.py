"""MLflow's private API, the one door to it (``optfarm.oracle.dependency_api``): a client's tracking
store, the batch validation ``log_batch`` applies, the server's store, how it is served, the
engines MLflow caches per URI, and the tables ``mlflow_bulk.write_runs`` INSERTs into (their
schema is that of ``mlflow_bulk.MLFLOW_VERSION``, which ``store_of`` checks). Every name is
listed in ``PRIVATE``; one that an upgrade dropped raises ``DependencyAPIError`` naming it."""

from __future__ import annotations

from optfarm.oracle.dependency_api import private, private_attribute

__all__ = [
    "PRIVATE",
    "TABLES",
    "cached_engines",
    "client_store",
    "served_by_uvicorn",
    "server_store",
    "table_models",
    "validated_batch",
]

_VALIDATION = "mlflow.utils.validation"
_MODELS = "mlflow.store.tracking.dbmodels.models"
TABLES = ("SqlRun", "SqlTag", "SqlParam", "SqlMetric", "SqlLatestMetric")  # parents first
PRIVATE = (
    (_VALIDATION, "_validate_batch_log_data"),
    (_VALIDATION, "_validate_param_keys_unique"),
    ("mlflow.server.handlers", "_get_tracking_store"),
    ("mlflow.environment_variables", "_MLFLOW_SGI_NAME"),
    ("mlflow.store.tracking.sqlalchemy_store", "SqlAlchemyStore._engine_map"),
    ("mlflow.tracking.client", "MlflowClient"),  # its ``_tracking_client.store``: client_store
    *((_MODELS, name) for name in TABLES),
)


def client_store(client):
    """The tracking store an ``MlflowClient`` writes through (``client._tracking_client.store``)."""
    return private_attribute(private_attribute(client, "_tracking_client"), "store")


def validated_batch(metrics, params, tags):
    """(metrics, params, tags) as ``log_batch`` validates them: MLflow's error for a bad name
    or value, duplicate parameter keys included."""
    metrics, params, tags = private(_VALIDATION, "_validate_batch_log_data")(metrics, params, tags)
    private(_VALIDATION, "_validate_param_keys_unique")(params)
    return metrics, params, tags


def server_store():
    """The tracking store of the ``mlflow server`` this code runs in."""
    return private("mlflow.server.handlers", "_get_tracking_store")()


def served_by_uvicorn() -> bool:
    """Whether ``mlflow server`` serves its app through uvicorn (else a WSGI server)."""
    return private("mlflow.environment_variables", "_MLFLOW_SGI_NAME").get() == "uvicorn"


def cached_engines() -> dict:
    """The SQLAlchemy engines MLflow keeps, one per store URI (pop one to close it)."""
    return private("mlflow.store.tracking.sqlalchemy_store", "SqlAlchemyStore._engine_map")


def table_models() -> dict:
    """{name: MLflow's SQLAlchemy model} of the tables in ``TABLES``."""
    return {name: private(_MODELS, name) for name in TABLES}
