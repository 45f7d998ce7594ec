"""One optimizer run: its specification (``spec``), the stepper that drives it on an oracle
(``loop``), and the metrics every summary, report and gate computes from it (``metrics``,
``recurring_job``)."""
