"""What a local Ray needs on a first run, and its start-up kept quiet.

Token authentication:

Ray 2.60 turns token authentication on for a local cluster; ``ray.init`` creates the token
file (``~/.ray/auth_token``) when it is missing, but ``ray start --head`` does not and fails
with an AuthenticationError until something else has made it. ``ensure_auth_token`` creates
it as ``ray get-auth-token --generate`` does, and pins ``RAY_AUTH_MODE=token`` in this process
and its children, which also silences Ray's "token authentication is enabled" warning.

Start-up under load (``start_local_ray``): the raylet waits 15 s (fixed in Ray 2.60) for its
dashboard agent, a Python process that imports much, to report its ports, and aborts if it has
not ("Timed out waiting for file .../metrics_agent_port_..." in ``raylet.out``); on a machine
whose cores are busy that happens, so a local start is tried up to three times. A start that
fails leaves its processes behind: ``ray.init`` raises before it records the node, so
``ray.shutdown`` does not know them, and Ray's reaper ends them only when this process exits
(late, on a loaded machine). Each failed try's processes (the GCS, a raylet that may hang,
its agents, the reaper) are killed and waited for before the next try.

Quiet start-up (``quiet_ray``): ``ray.init`` gets ``INIT_QUIET`` (no "Started a local Ray
instance" line), and the colorama wrapper Ray's CLI logger installs on import is taken off
again, so that no stray colour reset (ESC[0m) is written to the terminal at exit.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from pathlib import Path

__all__ = ["INIT_QUIET", "ensure_auth_token", "quiet_ray", "start_local_ray"]

INIT_QUIET = {"logging_level": logging.WARNING, "log_to_driver": False}
START_ATTEMPTS = 3


def start_local_ray(num_cpus: int | None = None, **init) -> None:
    """``ray.init`` of a new local Ray on 127.0.0.1 (its token made first), tried up to
    ``START_ATTEMPTS`` times when it fails to start (see the module doc); ``init``: more
    arguments of ``ray.init``."""
    import ray

    ensure_auth_token()
    import psutil  # Ray's own copy (ray/thirdparty_files), importable once Ray is

    this = psutil.Process()
    for attempt in range(1, START_ATTEMPTS + 1):
        before = set(this.children(recursive=True))
        try:
            ray.init(
                address="local",
                num_cpus=num_cpus,
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                **init,
            )
            return
        except Exception as e:  # the raylet or another of Ray's processes died at start-up
            _kill_and_wait(set(this.children(recursive=True)) - before)
            ray.shutdown()
            if attempt == START_ATTEMPTS:
                raise
            why = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            print(
                f"farm: the local Ray did not start ({why}); starting it again "
                f"({attempt + 1}/{START_ATTEMPTS})",
                file=sys.stderr,
                flush=True,
            )


def _kill_and_wait(processes, timeout: float = 10.0) -> None:
    """SIGKILL ``processes`` (psutil processes; a stopped one dies too) and wait until they
    are gone, the ones this process started reaped."""
    import psutil

    for process in processes:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(processes, timeout=timeout)


def ensure_auth_token() -> Path | None:
    """Make sure a local Ray cluster started now (``ray.init`` or ``ray start``) finds its
    token: the path of the token file, or None when the user turned authentication off
    (``RAY_AUTH_MODE=disabled``). A token given through ``RAY_AUTH_TOKEN`` or
    ``RAY_AUTH_TOKEN_PATH`` is left to Ray."""
    from optfarm.farm.runtime.ray_private import (
        create_token,
        default_token_path,
        reset_ray_config,
    )

    if "RAY_AUTH_MODE" not in os.environ:
        os.environ["RAY_AUTH_MODE"] = "token"
        reset_ray_config()  # Ray read its configuration at import: make it see the mode
    if os.environ["RAY_AUTH_MODE"].lower() != "token":
        return None

    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return None
    path = default_token_path()
    if not path.is_file():
        create_token()
        print(
            f"farm: created Ray's authentication token {path} (first Ray run on this machine)",
            file=sys.stderr,
        )
    return path


def quiet_ray() -> None:
    """Undo what importing Ray does to this process's output: Ray's copy of colorama wraps
    stdout and stderr and resets the terminal's colours at exit."""
    initialise = sys.modules.get("colorama.initialise")  # from Ray's thirdparty_files path
    if initialise is None:
        return
    initialise.deinit()
    atexit.unregister(initialise.reset_all)
