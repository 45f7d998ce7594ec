"""The nightly regression gate: reruns compared seed by seed with a committed baseline
(``regress``) and the mutation table that gates the gate (``mutations``)."""
