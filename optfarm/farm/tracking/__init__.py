"""MLflow tracking of a sweep: the tracker (``tracking``), the store it writes to
(``mlflow_connection``, ``mlflow_bulk``, ``mlflow_logger``), records as MLflow runs
(``mlflow_mapping``, ``variants``) and optfarm's MLflow server app (``mlflow_server_app``)."""
