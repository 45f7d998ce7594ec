"""The farm tests' local Ray on 127.0.0.1 (``ray_local``) for the Ray Tune adapter."""

from tests.farm.conftest import ray_local  # noqa: F401  (a fixture, used by name)
