from optfarm.farm.cli import run

run()
