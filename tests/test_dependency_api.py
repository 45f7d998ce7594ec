"""Each dependency's private API behind one door (issue 35): every private name the farm uses
resolves under the installed (locked) versions, and one that an upgrade dropped raises
``DependencyAPIError`` naming it, never an error blamed on something else (the Ray head)."""

from __future__ import annotations

import importlib

import pytest

from optfarm.oracle.dependency_api import DependencyAPIError, private, private_attribute

DOORS = {
    "ray": "optfarm.farm.runtime.ray_private",
    "mlflow": "optfarm.farm.tracking.mlflow_private",
    "optuna": "optfarm.optimizers.peers.optuna_private",
    "numba": "optfarm.optimizers.numba_private",
}


@pytest.mark.parametrize("library", sorted(DOORS))
def test_every_private_name_resolves_under_the_installed_version(library):
    pytest.importorskip(library)
    door = importlib.import_module(DOORS[library])
    assert door.PRIVATE and all(module.split(".")[0] == library for module, _ in door.PRIVATE)
    for module, name in door.PRIVATE:
        assert private(module, name) is not None, f"{module}.{name}"


def test_a_missing_name_or_module_is_one_line_naming_it_and_the_version():
    from importlib.metadata import version

    with pytest.raises(
        DependencyAPIError,
        match=r"^ray\._raylet\.NoSuchClient is missing "
        rf"from ray {version('ray')}: .*requirements/lock\.txt pins",
    ):
        private("ray._raylet", "NoSuchClient")
    with pytest.raises(DependencyAPIError, match=r"^mlflow\.server\.gone\._x is missing"):
        private("mlflow.server.gone", "_x")
    with pytest.raises(DependencyAPIError, match=r"SqlAlchemyStore\._no_map is missing"):
        private("mlflow.store.tracking.sqlalchemy_store", "SqlAlchemyStore._no_map")
    import pyarrow as pa

    with pytest.raises(
        DependencyAPIError,
        match=r"^pyarrow\.lib\.Table\._gone is missing "
        "from pyarrow ",
    ):
        private_attribute(pa.table({"a": [1]}), "_gone")


def test_mlflow_doors_reach_a_real_client_store_and_validate_a_batch(tmp_path):
    from mlflow.entities import Metric, Param
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from optfarm.farm.tracking.mlflow_bulk import store_of
    from optfarm.farm.tracking.mlflow_private import (
        cached_engines,
        client_store,
        validated_batch,
    )

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    store = client_store(MlflowClient(tracking_uri=uri))
    assert store_of(store) is store and uri in cached_engines()
    with pytest.raises(MlflowException, match="Duplicate parameter keys"):
        validated_batch([Metric("m", 1.0, 0, 0)], [Param("p", "1"), Param("p", "2")], [])


def test_optuna_doors_store_constraints_where_its_samplers_read_them_and_the_cma_state():
    optuna = pytest.importorskip("optuna")
    from optuna.samplers._base import _CONSTRAINTS_KEY

    from optfarm.optimizers.peers.optuna_private import set_constraints, told_cma_state

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    space = {
        "x": optuna.distributions.IntDistribution(0, 9),
        "y": optuna.distributions.IntDistribution(0, 9),
    }
    study = optuna.create_study(
        sampler=optuna.samplers.CmaEsSampler(
            seed=0, with_margin=True, n_startup_trials=0, warn_independent_sampling=False
        )
    )
    running = study.ask(space)
    set_constraints(study, running, [0.5, -1.0])  # before tell, as a sampler's after_trial
    study.tell(running, 1.0)
    assert study.get_trials(deepcopy=False)[0].system_attrs[_CONSTRAINTS_KEY] == (0.5, -1.0)
    for _ in range(14):  # popsize 6 for 2 dimensions: generations told
        trial = study.ask(space)
        study.tell(trial, (trial.params["x"] - 3) ** 2 + (trial.params["y"] - 5) ** 2)
    states = [told_cma_state(study.sampler, t) for t in study.get_trials(deepcopy=False)]
    assert states[0] is None and any(s is not None and s.generation >= 1 for s in states)


def test_a_dropped_ray_name_is_said_as_it_is_not_as_a_lost_head(monkeypatch):
    """An upgrade without ``ray._raylet.GcsClient``: HeadWatch's bounded call raises the API
    error; it does not count as a missed answer from the head."""
    raylet = pytest.importorskip("ray._raylet")
    import socket

    from optfarm.farm.runtime.capacity import HeadWatch

    monkeypatch.delattr(raylet, "GcsClient")
    with socket.create_server(("127.0.0.1", 0)) as server:
        watch = HeadWatch(f"127.0.0.1:{server.getsockname()[1]}", timeout=0.0)
        with pytest.raises(DependencyAPIError, match="ray._raylet.GcsClient is missing"):
            watch.cpus()
    assert watch.lost_since is None
