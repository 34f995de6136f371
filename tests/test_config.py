"""gp.randomization_from_config: IsaacGymEnvs-style dicts to terms."""

from __future__ import annotations

import pytest
import torch
from randomization_helpers import N, WindyCartPole, actions, cartpole

import gpuparam as gp

CONFIG = {
    "randomization_params": {
        "frequency": 50,
        "sim_params": {
            "gravity": {
                "range": [0.0, 0.4], "operation": "additive", "distribution": "gaussian",
                "schedule": "linear", "schedule_steps": 100,
            },
        },
        "actor_params": {
            "cartpole": {
                "color": True,
                "rigid_body_properties": {
                    "masspole": {"range": [0.5, 1.5], "operation": "scaling",
                                 "distribution": "uniform", "setup_only": True},
                    "masscart": {"range": [0.5, 2.0], "operation": "scaling",
                                 "distribution": "loguniform", "schedule": "constant",
                                 "schedule_steps": 30},
                },
                "dof_properties": {
                    "length": {"range": [0.9, 1.1], "operation": "scaling",
                               "distribution": "uniform", "frequency": 1},
                    "force_mag": {"range": [-1.0, 1.0], "operation": "additive",
                                  "distribution": "uniform", "on": "step"},
                },
            },
        },
    }
}


def by_param(terms):
    return {t.param: t for t in terms}


def test_mapping_of_every_key():
    t = by_param(gp.randomization_from_config(CONFIG))
    assert set(t) == {"gravity", "masspole", "masscart", "length", "force_mag"}
    g = t["gravity"]
    assert isinstance(g, gp.Gaussian) and g.op == "add" and g.on == gp.OnReset(50)
    assert g.schedule == gp.Linear((0.0, 0.0), (0.0, 0.4), 100)
    assert isinstance(t["masspole"], gp.Uniform) and t["masspole"].on == "startup"
    assert t["masspole"].op == "scale" and t["masspole"].range == (0.5, 1.5)
    m = t["masscart"]
    assert isinstance(m, gp.LogUniform) and m.schedule == gp.Step([(1.0, 1.0), (0.5, 2.0)], [30])
    assert t["length"].on == "reset"
    assert t["force_mag"].on == "step" and t["force_mag"].op == "add"
    assert "sim_params.gravity" in repr(g)


def test_config_terms_run_on_an_env():
    env = cartpole()
    env.randomize(*gp.randomization_from_config(CONFIG))
    assert ((env.params["masspole"] >= 0.05) & (env.params["masspole"] <= 0.15)).all()
    env.reset()
    assert (env.params["masscart"] == 1.0).all()  # constant schedule: no change before 30
    for a in actions(env, 40):
        env.step(a)
    assert ((env.params["force_mag"] >= 9.0) & (env.params["force_mag"] <= 11.0)).all()


def test_per_component_ranges_and_unwrapped_dicts():
    terms = gp.randomization_from_config({
        "wind": {"range": [[-1, -2, -3], [1, 2, 3]], "operation": "additive",
                 "distribution": "uniform"},
    })
    env = cartpole(cls=WindyCartPole)
    env.randomize(*terms)
    env.reset()
    assert (env.params["wind"].abs() <= torch.tensor([1.0, 2.0, 3.0])).all()
    assert env.params["wind"].shape == (N, 3)


@pytest.mark.parametrize(
    "entry, words",
    [
        ({"range": [0, 1], "operation": "additive"}, ["gravity", "missing 'distribution'"]),
        ({"range": [0, 1], "distribution": "uniform"}, ["missing 'operation'"]),
        ({"range": [0, 1], "operation": "additive", "distribution": "beta"}, ["distribution"]),
        ({"range": [0, 1], "operation": "multiply", "distribution": "uniform"}, ["operation"]),
        ({"range": [0], "operation": "additive", "distribution": "uniform"}, ["range"]),
        ({"range": [0, 1], "operation": "additive", "distribution": "uniform", "rnage": 1},
         ["unknown keys ['rnage']"]),
        ({"range": [0, 1], "operation": "additive", "distribution": "uniform",
          "schedule": "linear"}, ["schedule_steps"]),
        ({"range": [0, 1], "operation": "additive", "distribution": "uniform",
          "schedule": "cosine", "schedule_steps": 5}, ["'linear' or 'constant'"]),
        ({"range": [1, 0], "operation": "additive", "distribution": "uniform"}, ["low 1.0 > high"]),
        ({"range": [0, 1], "operation": "additive", "distribution": "uniform",
          "frequency": -2}, ["frequency"]),
    ],
)
def test_bad_entries_raise(entry, words):
    with pytest.raises(ValueError) as e:
        gp.randomization_from_config({"sim_params": {"gravity": entry}})
    for w in words:
        assert w in str(e.value)


def test_noise_entries_are_refused():
    cfg = {"observations": {"range": [0, 0.01], "operation": "additive",
                            "distribution": "gaussian"}}
    with pytest.raises(ValueError, match="'observations' is noise on data"):
        gp.randomization_from_config(cfg)
    with pytest.raises(ValueError, match="expected a dict"):
        gp.randomization_from_config([1, 2])
