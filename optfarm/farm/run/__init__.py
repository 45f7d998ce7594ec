"""One optimizer run: its specification and run key (``spec``), the ``Stepper`` that drives
every run on an oracle (``loop``), and every metric summaries, reports, gates and benchmarks
compute from it, defined once (``metrics``, ``recurring_job``)."""
