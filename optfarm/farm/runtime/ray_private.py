"""Ray's private API, the one door to it (``optfarm.oracle.dependency_api``): the GCS client ``ray
status`` uses, the autoscaler's keys, the authentication token's set-up and the internal key
store. Every name is listed in ``PRIVATE``; one that an upgrade dropped raises
``DependencyAPIError`` naming it, never a ``ClusterLost`` ("lost the Ray head")."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from pathlib import Path

from optfarm.oracle.dependency_api import private

__all__ = [
    "PRIVATE",
    "autoscaler_v1_channel",
    "autoscaler_v2_keys",
    "create_token",
    "default_token_path",
    "drop_driver_errors",
    "gcs_client",
    "internal_kv_get",
    "reset_ray_config",
]

_RAYLET = "ray._raylet"
_CONSTANTS = "ray._private.ray_constants"
_TOKEN = "ray._private.authentication.authentication_token_setup"
PRIVATE = (
    (_RAYLET, "GcsClient"),
    (_RAYLET, "GCS_AUTOSCALER_V2_ENABLED_KEY"),
    (_RAYLET, "GCS_AUTOSCALER_STATE_NAMESPACE"),
    (_RAYLET, "AuthenticationTokenLoader"),
    (_RAYLET, "Config"),
    (_CONSTANTS, "AUTOSCALER_RESOURCE_REQUEST_CHANNEL"),
    (_TOKEN, "_get_default_token_path"),
    (_TOKEN, "generate_and_save_token"),
    ("ray.experimental.internal_kv", "_internal_kv_get"),
    ("ray._private.worker", "print_to_stdstream"),
)


def gcs_client(address: str):
    """Ray's own client of the head's GCS at ``host:port`` (as ``ray status``'s)."""
    return private(_RAYLET, "GcsClient")(address=address)


def autoscaler_v2_keys() -> tuple[bytes, bytes]:
    """(key, namespace) of the GCS entry saying whether the autoscaler is v2 (as
    ``ray.autoscaler.v2.utils.is_autoscaler_v2`` reads it)."""
    return (
        private(_RAYLET, "GCS_AUTOSCALER_V2_ENABLED_KEY").encode(),
        private(_RAYLET, "GCS_AUTOSCALER_STATE_NAMESPACE").encode(),
    )


def autoscaler_v1_channel():
    """The internal-KV key the v1 autoscaler reads resource requests from (what
    ``ray.autoscaler.sdk.request_resources`` writes)."""
    return private(_CONSTANTS, "AUTOSCALER_RESOURCE_REQUEST_CHANNEL")


def internal_kv_get(key):
    """The value of ``key`` in the connected cluster's internal key store (None: unset)."""
    return private("ray.experimental.internal_kv", "_internal_kv_get")(key)


def reset_ray_config() -> None:
    """Make Ray re-read its configuration from the environment (it reads it at import)."""
    private(_RAYLET, "Config").initialize("")


def default_token_path() -> Path:
    """Where Ray looks for its authentication token when none is given."""
    return private(_TOKEN, "_get_default_token_path")()


def create_token() -> None:
    """Generate and save Ray's authentication token (its own log line quieted) and make
    Ray's token loader forget what it cached."""
    generate = private(_TOKEN, "generate_and_save_token")
    logging.getLogger(generate.__module__).setLevel(logging.WARNING)
    generate()
    private(_RAYLET, "AuthenticationTokenLoader").instance().reset_cache()


def drop_driver_errors(drop: Callable[[str], bool]) -> None:
    """Keep Ray's driver from printing the errors its cluster publishes (each one a paragraph
    on stdout, e.g. a worker that died) for which ``drop(text)`` is true: its listener thread
    prints them through ``ray._private.worker.print_to_stdstream``, which is wrapped once."""
    module = importlib.import_module("ray._private.worker")
    show = private("ray._private.worker", "print_to_stdstream")
    if getattr(show, "dropping", None) is not None:
        show.dropping = drop
        return

    def filtered(data, ignore_prefix):
        lines = data.get("lines", [])
        if data.get("pid") == "raylet":
            lines = [line for line in lines if not filtered.dropping(line)]
        if lines:
            show({**data, "lines": lines}, ignore_prefix)

    filtered.dropping = drop
    module.print_to_stdstream = filtered
