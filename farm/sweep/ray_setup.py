"""What a local Ray needs on a first run, and its start-up kept quiet.

Token authentication:

Ray 2.60 turns token authentication on for a local cluster; ``ray.init`` creates the token
file (``~/.ray/auth_token``) when it is missing, but ``ray start --head`` does not and fails
with an AuthenticationError until something else has made it. ``ensure_auth_token`` creates
it as ``ray get-auth-token --generate`` does, and pins ``RAY_AUTH_MODE=token`` in this process
and its children, which also silences Ray's "token authentication is enabled" warning.

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

__all__ = ["INIT_QUIET", "ensure_auth_token", "quiet_ray"]

INIT_QUIET = {"logging_level": logging.WARNING, "log_to_driver": False}


def ensure_auth_token() -> Path | None:
    """Make sure a local Ray cluster started now (``ray.init`` or ``ray start``) finds its
    token: the path of the token file, or None when the user turned authentication off
    (``RAY_AUTH_MODE=disabled``). A token given through ``RAY_AUTH_TOKEN`` or
    ``RAY_AUTH_TOKEN_PATH`` is left to Ray."""
    from ray._private.authentication.authentication_token_setup import (
        _get_default_token_path,
        generate_and_save_token,
    )
    from ray._raylet import AuthenticationTokenLoader, Config

    if "RAY_AUTH_MODE" not in os.environ:
        os.environ["RAY_AUTH_MODE"] = "token"
        Config.initialize("")  # Ray read its configuration at import: make it see the mode
    if os.environ["RAY_AUTH_MODE"].lower() != "token":
        return None

    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return None
    path = _get_default_token_path()
    if not path.is_file():
        logging.getLogger(generate_and_save_token.__module__).setLevel(logging.WARNING)
        generate_and_save_token()
        AuthenticationTokenLoader.instance().reset_cache()
        print(f"farm: created Ray's authentication token {path} (first Ray run on this "
              "machine)", file=sys.stderr)
    return path


def quiet_ray() -> None:
    """Undo what importing Ray does to this process's output: Ray's copy of colorama wraps
    stdout and stderr and resets the terminal's colours at exit."""
    initialise = sys.modules.get("colorama.initialise")  # from Ray's thirdparty_files path
    if initialise is None:
        return
    initialise.deinit()
    atexit.unregister(initialise.reset_all)
