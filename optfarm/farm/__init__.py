"""optfarm's runtime, above ``optfarm/oracle/`` and ``optfarm/optimizers/``:

- ``cli/``     the ``farm`` command line, one module per command;
- ``run/``     one optimizer run: spec and run key, the Stepper, every metric;
- ``sweep/``   sweeps: spec, runner, Ray runtime, results store, MLflow tracking;
- ``report/``  reports (numbers, page, pluggable sections, plots), the papers' numbers, the gate;
- ``bench/``   latency and farm-overhead benchmarks.
"""
