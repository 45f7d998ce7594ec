"""What a local Ray needs on a first run, and its start-up kept quiet.

Token authentication:

Ray 2.60 turns token authentication on for a local cluster; ``ray.init`` creates the token
file (``~/.ray/auth_token``) when it is missing, but ``ray start --head`` does not and fails
with an AuthenticationError until something else has made it. ``ensure_auth_token`` creates
it as ``ray get-auth-token --generate`` does, and pins ``RAY_AUTH_MODE=token`` in this process
and its children, which also silences Ray's "token authentication is enabled" warning.

Start-up under load (``start_local_ray``): the raylet waits 15 s (fixed in Ray 2.60) for its
dashboard agent, a Python process that imports much, to report its ports, and aborts if it has
not ("Timed out waiting for file .../metrics_agent_port_..." in ``raylet.out``), and
``ray.init`` waits 30 s (fixed too) for the raylet to register ("The current node timed out
during startup"); on a machine whose cores are busy (issue 44: load 29-41 on 2 cores) that
happens again and again, and only a lull in the load lets a start through. So a local start
is tried again, after a pause that grows with the tries and with the machine's load
(``start_pause``, shared with ``farm cluster``'s nodes), for as long as the start's wait
allows: ``wait`` seconds from the first try, by default ``$FARM_RAY_START_WAIT``, else
``START_WAIT_S``; then ``LocalRayDidNotStart`` (the sweep runs in-process instead:
``optfarm.farm.sweep.runner``). A start that fails leaves its processes behind:
``ray.init`` raises before it records the node, so ``ray.shutdown`` does not know them, and
Ray's reaper ends them only when this process exits (late, on a loaded machine). Each failed
try's processes (the GCS, a raylet that may hang, its agents, the reaper) are killed and
waited for before the next try.

Quiet start-up (``quiet_ray``): ``ray.init`` gets ``INIT_QUIET`` (no "Started a local Ray
instance" line), and the colorama wrapper Ray's CLI logger installs on import is taken off
again, so that no stray colour reset (ESC[0m) is written to the terminal at exit.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import math
import os
import sys
import time
from pathlib import Path

__all__ = [
    "INIT_QUIET",
    "START_WAIT_ENV",
    "START_WAIT_S",
    "LocalRayDidNotStart",
    "ensure_auth_token",
    "load_stretch",
    "quiet_ray",
    "start_local_ray",
    "start_pause",
    "start_wait",
]

INIT_QUIET = {"logging_level": logging.WARNING, "log_to_driver": False}
START_WAIT_S = 300.0  # a local Ray start's tries, together, by default
START_WAIT_ENV = "FARM_RAY_START_WAIT"
START_PAUSE_S = 5.0  # the pause after a failed start, times the try's number
MAX_PAUSE_S = 60.0
LOADED_PER_CORE = 4.0  # a load average per core above this stretches the pauses


class LocalRayDidNotStart(RuntimeError):
    """A local Ray did not start within its wait (one line: how long, how many tries, the
    machine's load, the last try's cause)."""


def start_wait() -> float:
    """Seconds a local Ray start may take, its tries together: ``$FARM_RAY_START_WAIT``, else
    ``START_WAIT_S``. A value that is not a number of seconds >= 0 is refused (ValueError,
    naming the variable)."""
    text = os.environ.get(START_WAIT_ENV)
    if text is None:
        return START_WAIT_S
    try:
        wait = float(text)
    except ValueError:
        wait = math.nan
    if not wait >= 0 or math.isinf(wait):
        raise ValueError(f"{START_WAIT_ENV}={text!r} is not a number of seconds >= 0")
    return wait


def load_stretch() -> float:
    """How much busier than ``LOADED_PER_CORE`` this machine is now (at least 1): its load
    average per core over that."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1) / LOADED_PER_CORE)


def start_pause(attempt: int) -> float:
    """The pause after failed start ``attempt``: ``START_PAUSE_S`` x attempt, stretched by the
    load (``load_stretch``), at most ``MAX_PAUSE_S``: a burst of load may pass meanwhile."""
    return min(MAX_PAUSE_S, START_PAUSE_S * attempt * load_stretch())


def start_local_ray(num_cpus: int | None = None, wait: float | None = None, **init) -> None:
    """``ray.init`` of a new local Ray on 127.0.0.1 (its token made first), tried again after
    a failed start while ``wait`` seconds (default ``start_wait()``) from the first try allow
    the pause and another try (see the module doc); ``LocalRayDidNotStart`` after the last.
    ``init``: more arguments of ``ray.init``."""
    import ray

    ensure_auth_token()
    import psutil  # Ray's own copy (ray/thirdparty_files), importable once Ray is

    this = psutil.Process()
    t0 = time.monotonic()
    wait = start_wait() if wait is None else wait
    for attempt in itertools.count(1):
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
            why = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            pause, spent = start_pause(attempt), time.monotonic() - t0
            if spent + pause >= wait:
                raise LocalRayDidNotStart(
                    f"a local Ray did not start in {spent:.0f} s ({attempt} tries at load "
                    f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; the last: {why})"
                ) from None
            print(
                f"farm: the local Ray did not start ({why}); starting it again in "
                f"{pause:.0f} s (try {attempt + 1}, {wait - spent:.0f} s of its wait left)",
                file=sys.stderr,
                flush=True,
            )
            time.sleep(pause)


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
