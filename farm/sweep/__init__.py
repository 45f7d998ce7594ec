"""Sweeps: the spec and its expansion (``spec``), running them (``runner``) on Ray
(``ray_runtime``) or in-process (``serial``), the results store (``store``), MLflow tracking
(``tracking``) and the cluster entry script (``submit``)."""
