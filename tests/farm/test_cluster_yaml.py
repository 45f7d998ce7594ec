"""``cluster.yaml`` passes Ray's own validation of a cluster launcher config (what ``ray up``
checks before it calls the cloud: the defaults of the provider merged in, then the JSON
schema and the node types), and runs Ray's image of the locked Ray (requirements/lock.txt) with
Python 3.11. Launching it needs an AWS account (docs/guide/cluster.md: the commands)."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import pytest
import ray
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _validated(config: dict) -> dict:
    from ray.autoscaler._private.util import prepare_config, validate_config

    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


def test_cluster_yaml_passes_rays_validation():
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    prepared = _validated(config)
    assert prepared["head_node_type"] == "head"
    assert prepared["available_node_types"]["worker"]["max_workers"] == 16


def test_cluster_yaml_runs_rays_image_of_the_pinned_ray_and_python_3_11():
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    # the lock holds the exact tested Ray (pyproject.toml only its lower bound)
    lock = (ROOT / "requirements" / "lock.txt").read_text().splitlines()
    pinned = next(line for line in lock if line.startswith("ray==")).split("==")[1].split()[0]
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f">={pinned}" in next(d for d in deps if d.startswith("ray["))
    assert pinned == ray.__version__
    assert config["docker"]["image"] == f"rayproject/ray:{pinned}-py311-cpu"
    assert any("Python 3.11" in c for c in config["setup_commands"])  # checked on each node
    assert any("datasets fetch" in c for c in config["head_setup_commands"])


def test_a_misspelt_key_is_refused_by_the_same_validation():
    import jsonschema

    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    config["docker"]["pull_before_runs"] = config["docker"].pop("pull_before_run")
    with pytest.raises(jsonschema.ValidationError, match="pull_before_runs"):
        _validated(config)
