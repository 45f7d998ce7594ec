"""optfarm's runtime: the run loop, CLI, sweeps on Ray, results store, MLflow, reports."""
