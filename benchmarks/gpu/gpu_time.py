"""GPU-side time of a host call, from the CUDA profiler (CUDA runs only)."""

from __future__ import annotations

import torch

import gpuparam as gp


def device_time_per_call(fn, calls: int = 100) -> dict:
    """Kernels and copies (memcpy/memset) per call, counted apart, and their summed GPU
    time per call, in seconds.

    Also reports whether torch synchronizes with the host inside ``fn`` (sync debug mode).
    """
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == DeviceType.CUDA]

    def us(e) -> float:
        for attr in ("self_device_time_total", "device_time_total", "cuda_time_total"):
            if hasattr(e, attr):
                return float(getattr(e, attr))
        return 0.0

    total_us = sum(us(e) for e in events)
    copies = [e for e in events if "memcpy" in e.name.lower() or "memset" in e.name.lower()]
    syncs = False
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn()
    except RuntimeError:
        syncs = True
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return {
        "gpu_s_per_call": total_us * 1e-6 / calls,
        "device_ops_per_call": len(events) / calls,
        "kernels_per_call": (len(events) - len(copies)) / calls,
        "copies_per_call": len(copies) / calls,
        "op_names": sorted({e.name for e in events})[:10],
        "torch_sync_inside": syncs,
        "calls": calls,
    }


def masked_write_gpu_time(device: str, n: int) -> dict:
    """GPU time of ``env.params.set("length", 0.9, mask=m, validate=False)`` at N envs."""
    env = gp.make("CartPole-v1", num_envs=n, device=device, seed=0)
    mask = torch.rand(n, device=env.device) < 0.5
    res = device_time_per_call(lambda: env.params.set("length", 0.9, mask=mask, validate=False))
    return {"num_envs": n, **res}
