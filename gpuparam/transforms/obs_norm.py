"""Observation normalization with per-group running statistics and a masked reset."""

from __future__ import annotations

import torch
import warp as wp

from gpuparam._device import stream_for, wp_device
from gpuparam.transforms.running_stats import GroupedRunningStats, Layout


class ObsNorm(GroupedRunningStats):
    """Normalize observations ``(x - mean[g]) / sqrt(var[g] + eps)`` per env group ``g``.

    Args:
        shape: per-env observation shape (``int`` or tuple), e.g. ``4`` or ``(4,)``.
        group_ids: long tensor ``[N]`` on ``device``: the group of each env. ``None``: one
            group shared by all envs (G=1). ``torch.arange(N)`` gives per-env statistics.
        num_groups: G (default ``group_ids.max() + 1``), to allow groups with no env yet.
        num_envs: N when ``group_ids`` is ``None`` (else learnt from the first batch).
        clip: clip outputs to ``[-clip, clip]`` (``> 0``) or ``None``.
        eps: added to the variance.
        reset_on: parameter names; when attached to an env (:meth:`attach` or
            ``TransformedEnv``), a masked write of one of them resets the groups of the
            written envs.
        device: device of every buffer (default ``group_ids.device``, else CPU).

    Statistics, buffers and settings: see ``GroupedRunningStats``; ``std`` / ``var`` float64
    ``[G, *shape]`` (population) on the device.

    In training mode and not frozen, ``forward`` merges the batch into the statistics, then
    normalizes with them (right after a reset: with the current batch's). A group with count
    0 (reset, eval mode, no env) normalizes with mean 0 and var 1 (``x / sqrt(1 + eps)``); one
    sample normalizes to 0. The float32 output is ``(x - mean) * scale`` to float32 rounding,
    even far from 0. A sample holding NaN or inf is left out of its group's statistics and
    counted in ``nonfinite``; its output is NaN or inf, the others use the finite samples.

    On the ``[N, *shape]`` env batch an update is three Warp launches and the normalization
    one, over scratch allocated once N is known. Learner side: ``forward(x, train=...)`` and
    ``normalize`` also take other leading shapes, e.g. a minibatch ``[64, *shape]`` or a
    rollout ``[T, N, *shape]`` (with several groups the last leading dimension must be N),
    through the same kernels with scratch allocated per call; merged in only when asked
    (``train=True``, as skrl's preprocessor passes). ``forward(x)`` takes the env batch
    only: a batch of the wrong size is an error, not a silent update.
    """

    def _mode(self, train: bool | None) -> int:
        if train is not None and not isinstance(train, bool):
            raise ValueError(f"ObsNorm: train expected a bool or None, got {train!r}")
        return {None: 2, True: 1, False: 0}[train]  # the kernels' ``mode``

    def forward(
        self, x: torch.Tensor, out: torch.Tensor | None = None, *, train: bool | None = None
    ) -> torch.Tensor:
        """Update the statistics with ``x`` (see ``train``), then normalize it.

        Args:
            x: float32 tensor on the module's device: ``[N, *shape]`` (the env batch, the
                hot path), or, with ``train`` given, any leading batch shape:
                ``[*B, *shape]`` with one group, ``[*B, N, *shape]`` with several.
            out: optional float32 tensor of ``x``'s shape on the device to write into (may
                be ``x`` itself); otherwise a new tensor is returned.
            train: ``None`` updates in training mode unless frozen (env batches only);
                ``True`` updates unless frozen (whatever the mode); ``False`` only
                normalizes. skrl's preprocessor call passes it.

        Returns:
            float32 tensor of ``x``'s shape on the device.
        """
        # not the [N, *shape] env batch (nor one that may become it while N is unknown)
        if not (isinstance(x, torch.Tensor) and x.dim() == 1 + len(self.shape)
                and x.shape[1:] == self.shape and self.num_envs in (None, x.shape[0])):
            if train is None:
                self._check_tensor(x, "x", torch.float32, hint=(
                    " (the env batch; pass train=True or train=False, or call normalize, "
                    "for a learner batch of another shape)"))
            return self._forward_batch(x, out, self._mode(train) == 1 and not self.frozen)
        out = torch.empty(x.shape, device=x.device) if out is None else out
        self.forward_pair(x, out, train=train)
        return out

    def normalize(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Normalize ``x`` without touching the statistics; arguments as in :meth:`forward`
        (any leading batch shape, e.g. a learner's minibatch ``[64, *shape]``)."""
        return self.forward(x, out, train=False)

    def forward_pair(
        self, x: torch.Tensor, out: torch.Tensor, x2: torch.Tensor | None = None,
        out2: torch.Tensor | None = None, *, train: bool | None = None, stream=None,
    ) -> None:
        """``forward(x, out=out, train=train)`` then ``normalize(x2, out=out2)`` with the same
        statistics, the normalization of both in one launch (what ``TransformedEnv`` does
        with ``final_observation`` and ``observation``).

        Args:
            x, out: float32 ``[N, *shape]`` on the device, ``out`` contiguous (may be ``x``).
            x2, out2: the same, or None; ``out2`` may be ``x2``, ``out`` must not be ``x2``.
            train: as in :meth:`forward` (``None``: update in training mode unless frozen).
            stream: the ``wp.Stream`` to launch on (None: torch's current stream; on CPU
                there is none).
        """
        if out is None or (x2 is not None and out2 is None):
            raise ValueError("ObsNorm.forward_pair: expected output tensors out and out2, got None")
        mode = self._mode(train)
        e, (x, out, x2, out2) = self._env_batch("x out x2 out2", x, out, x2, out2)
        stream = stream_for(self.device) if stream is None else stream
        if mode:
            e.update(x, e.none64, mode, stream)
        e.normalize(x, out, x2, out2, stream)

    def _forward_batch(self, x: torch.Tensor, out, update: bool) -> torch.Tensor:
        """Learner side: ``x`` ``[*B, *shape]`` (one group) or ``[*B, N, *shape]`` (N is
        known with several groups); merged in (``update``), then normalized."""
        name, S, n, one = type(self).__name__, self.shape, self.num_envs, self.num_groups == 1
        want = f"(*batch, {'' if one else f'{n}, '}{', '.join(map(str, S))})"
        self._check_tensor(x, "x", torch.float32, want)
        lead = x.shape[: x.dim() - len(S)]
        if not (lead and x.shape[len(lead):] == S and x.numel() and (one or lead[-1] == n)):
            raise ValueError(f"{name}: x expected shape {want}, got {tuple(x.shape)}")
        if out is not None:
            self._check_tensor(out, "out", torch.float32, str(tuple(x.shape)))
            if out.shape != x.shape:
                raise ValueError(f"{name}: out expected shape {tuple(x.shape)} (that of x), "
                                 f"got {tuple(out.shape)}")
        e, xs, dev = self._eng(), x.detach().reshape(-1, *S).contiguous(), self.device
        M, stream = xs.shape[0], stream_for(dev)
        y = torch.empty(xs.shape, dtype=torch.float32, device=dev)
        if update:  # the env path's kernels, with scratch allocated per call
            # one group: a layout of M rows, kept while M is (building one syncs on CUDA)
            if one and e.rows[0] != M:
                e.rows = (M, Layout(None, 1, M, dev))
            layout = e.rows[1] if one else e.layout
            B, n_env = (1, M) if one else (M // n, n)
            stamp = wp.from_torch(torch.zeros(M, dtype=torch.int64, device=dev))
            specs = e.tree(wp.from_torch(xs.view(-1)), e.none64, n_env, layout,
                           layout.scratch(B, e.P, dev), stamp, B, 1)
            for kernel, dim, inputs, outputs in specs:
                wp.launch(kernel, dim=dim, inputs=inputs, outputs=outputs,
                          device=wp_device(dev), stream=stream)
        e.normalize(xs, y, None, None, stream)
        return y.view(x.shape) if out is None else out.copy_(y.view(x.shape))
