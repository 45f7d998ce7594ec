"""optfarm's runtime, above ``oracle/`` and ``optimizers/``:

- ``cli/``     the ``farm`` command line, one module per command;
- ``run/``     one optimizer run: spec, run loop, metrics;
- ``sweep/``   sweeps: spec, runner, Ray runtime, results store, MLflow tracking;
- ``report/``  reports, plots, the papers' numbers and the regression gate;
- ``bench/``   latency and farm-overhead benchmarks.
"""
