"""Sweeps: the spec and its expansion (``spec``), running them (``runner``) on Ray
(``ray_runtime``) or in-process (``serial``), the results store (``store``) and its read API
(``results``), MLflow tracking (``tracking``)."""
