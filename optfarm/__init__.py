"""optfarm: a distributed benchmark farm for cloud-configuration optimizers.

Its layers, from the bottom (ARCHITECTURE.md, "Layers"):

- ``optfarm.oracle``        datasets as Arrow tables, search spaces, problems, the oracle;
- ``optfarm.optimizers``    the ask/tell optimizers, their models and acquisitions;
- ``optfarm.farm``          the runtime: runs, sweeps, the store, MLflow, Ray, reports, the CLI;
- ``optfarm.integrations``  the farm's optimizers inside Optuna and Ray Tune.

The built-in sweep specs and nightly baselines ship as package data in ``optfarm/sweeps``.
"""
