"""``python -m optfarm``: the ``farm`` command line."""

from optfarm.farm.cli import run

run()
