"""The script ``ray submit cluster.yaml farm/cli/submit.py -- sweep SPEC ...`` runs on the head
node: the ``farm`` command line, joined to the cluster running there (``RAY_ADDRESS=auto``
unless set), from the optfarm checkout that ``cluster.yaml`` mounts at ``~/optfarm``."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("RAY_ADDRESS", "auto")
    os.chdir(os.path.expanduser("~/optfarm"))
    from farm.cli import main

    sys.exit(main(sys.argv[1:]))
