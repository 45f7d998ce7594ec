from farm.cli import run

run()
