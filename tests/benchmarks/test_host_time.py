"""The masked-write timing benchmark (issue 41 item 3) runs on the CPU and guards its CUDA
path: figures are measured (not asserted: timing goals are the benchmark's), the calls write
what they say, and the device-time path refuses a CPU device cleanly."""

from __future__ import annotations

import pytest
import torch

from benchmarks import host_time


def test_masked_writes_reports_every_call_and_the_goals():
    res = host_time.masked_writes("cpu", calls=5)
    names = ("set", "set_tensor", "set_tensor_validated", "reset_stats", "set_reset_stats",
             "set_reset_stats_tensor", "set_reset_stats_tensor_validated")
    for name in names:
        assert 0 < res[f"{name}_s"] <= res[f"{name}_median_s"], name
    assert res["measures"] == "host" and res["num_envs"] == 1
    assert set(res["goals"]) == {"set", "set_tensor", "set_tensor_validated", "set_reset_stats",
                                 "set_reset_stats_tensor", "set_reset_stats_tensor_validated"}
    assert res["goals"]["set"]["limit_s"] == 12e-6
    assert res["goals"]["set_reset_stats"]["limit_s"] == 20e-6


def test_write_calls_write_the_masked_envs():
    fns, env, norm, masks = host_time.write_calls("cpu", 64)
    env.params.set("length", 0.5)
    for name, value in (("set_reset_stats_tensor", 0.9), ("set_tensor_validated", 0.9)):
        fns[name](3)
        want = torch.where(masks[3], torch.tensor(value), torch.tensor(0.5))
        assert torch.equal(env.params["length"], want), name
        env.params.set("length", 0.5)
    assert masks[3].any() and not masks[3].all()
    assert norm.count.sum() == 0  # the reset of the group the masked envs use


def test_device_time_is_guarded_on_cpu():
    assert "skipped" in host_time.masked_write_device_time("cpu", 1)
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        host_time.captured_device_time(lambda i: None, torch.device("cpu"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_device_time_without_host_pacing_on_cuda():
    res = host_time.masked_write_device_time("cuda", 1024)
    for name in ("set", "set_tensor", "reset_stats", "set_reset_stats"):
        assert res[name]["device_s_per_call"] > 0, res[name]
    assert 0 < res["set"]["fraction_of_copy_bandwidth"]
