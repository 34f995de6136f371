"""Exported policies: ``exported/policy.pt2`` (``torch.export``'s ``ExportedProgram``,
saved with ``torch.export.save``) and ``exported/policy.onnx`` (``torch.onnx.export``,
its dynamo exporter): raw observations float32 ``[B, obs_dim]`` in (rsl_rl's observation
normalization inside), actions float32 ``[B, num_actions]`` out (the Gaussian's mean,
clamped to the action bounds where the run clipped actions), ``B`` dynamic, on the CPU.

Load them with ``torch.export.load("policy.pt2").module()`` and
``onnxruntime.InferenceSession("policy.onnx")`` (input ``"obs"``, output ``"actions"``).
"""

from __future__ import annotations

import logging
import os
import warnings

import torch

__all__ = ["Policy", "export_policy", "load_policy_file"]


class Policy(torch.nn.Module):
    """rsl_rl's deterministic actor (``MLPModel.as_jit()``: observation normalizer, MLP,
    the distribution's mean) with the adapter's action clamp: float32 ``[B, obs_dim]`` in,
    float32 ``[B, num_actions]`` out.

    Args:
        actor: ``runner.alg.get_policy().as_jit()`` (or any module of that contract).
        low, high: the clamp's bounds, float32 ``[num_actions]``; None: no clamp.
    """

    def __init__(self, actor: torch.nn.Module, low: torch.Tensor | None = None,
                 high: torch.Tensor | None = None):
        super().__init__()
        self.actor = actor
        self.clamp = low is not None
        self.register_buffer("low", torch.as_tensor(low if low is not None else 0.0,
                                                    dtype=torch.float32))
        self.register_buffer("high", torch.as_tensor(high if high is not None else 0.0,
                                                     dtype=torch.float32))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        out = self.actor(obs)
        if self.clamp:
            out = torch.clamp(out, self.low, self.high)
        return out


def export_policy(policy: Policy, obs_dim: int, folder: str) -> tuple[str, str]:
    """Write ``policy.pt2`` and ``policy.onnx`` under ``folder`` (created); returns their
    paths. Runs on the CPU (a copy of ``policy``)."""
    os.makedirs(folder, exist_ok=True)
    policy = policy.to("cpu").eval()
    example = (torch.zeros(2, obs_dim),)
    batch = torch.export.Dim("batch", min=1)
    shapes = {"obs": {0: batch}}
    with torch.no_grad():
        program = torch.export.export(policy, example, dynamic_shapes=shapes)
    pt = os.path.join(folder, "policy.pt2")  # torch.export's archive (its suffix)
    torch.export.save(program, pt)
    onnx = os.path.join(folder, "policy.onnx")
    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the exporter's notes on its own registry (torchvision)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(policy, example, onnx, dynamo=True, input_names=["obs"],
                              output_names=["actions"], dynamic_shapes=shapes,
                              external_data=False, verbose=False)
    finally:
        quiet.setLevel(level)
    return pt, onnx


def load_policy_file(path: str, device: str) -> torch.nn.Module:
    """An exported policy: ``torch.export``'s ``policy.pt2``, or a TorchScript file (what
    the earlier ``examples/go1_train.py --export`` wrote, e.g. ``examples/go1_policy.pt``);
    ``ValueError`` for anything else."""
    try:
        return torch.export.load(path).module().to(device)
    except Exception:  # noqa: BLE001 - not an ExportedProgram: try TorchScript
        pass
    try:
        return torch.jit.load(path, map_location=device).eval()
    except Exception as e:  # noqa: BLE001 - neither kind
        raise ValueError(f"--checkpoint: expected an rsl_rl checkpoint (model_<it>.pt), an "
                         f"exported policy.pt2 or a TorchScript policy, got {path} ({e})"
                         ) from None
