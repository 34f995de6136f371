"""TorchRL's PPO on gpuparam's CartPole, with a parameter change in the middle of training.

Everything but the env is TorchRL's public API: a ``ProbabilisticActor`` with a
``OneHotCategorical`` head, a ``ValueOperator`` critic, a ``Collector`` stepping all N envs
as one batched ``TorchRLEnv``, ``GAE`` advantages and the ``ClipPPOLoss`` objective. At
iteration ``--switch-at`` the pole of half the envs (group 1) gets shorter (``--new-length``,
half-length in m; 0.5 before) and their cart must stay nearer the centre
(``--new-x-threshold``, m; 2.4 before): one masked ``env.params.set`` under the running
collector, which keeps going (no rebuild, no restart). Each log line gives the mean return
of the episodes that ended in that iteration, per group, so group 1's drop after the
switch and its (partial) recovery show.

torch runs on ``--threads`` threads (default 1): PPO's results depend on the thread count.
Nothing is written to disk.

    python examples/torchrl_ppo.py                 # N=256, 60 iterations (examples/README.md)
    python examples/torchrl_ppo.py --num-envs 16 --iterations 3 --rollout 8 --switch-at 1
"""

from __future__ import annotations

import argparse
import time

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

import gpuparam as gp
from gpuparam.integrations.torchrl import TorchRLEnv


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--iterations", type=int, default=60)
    p.add_argument("--rollout", type=int, default=32, help="steps per env per iteration")
    p.add_argument("--switch-at", type=int, default=30,
                   help="iteration at which group 1's parameters change")
    p.add_argument("--new-length", type=float, default=0.25,
                   help="group 1's pole half-length after the switch (m)")
    p.add_argument("--new-x-threshold", type=float, default=0.8,
                   help="group 1's |x| limit after the switch (m)")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--lam", type=float, default=0.95)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--entropy", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (results depend on it)")
    return p.parse_args(argv)


def make_agent(env: TorchRLEnv) -> tuple[ProbabilisticActor, ValueOperator]:
    """The actor (logits -> a one-hot action, its log-probability in ``"action_log_prob"``)
    and the critic (``"state_value"``), two 64-64 tanh MLPs on the env's device."""
    obs = env.observation_spec["observation"].shape[-1]
    n = env.action_spec.shape[-1]
    logits = MLP(in_features=obs, out_features=n, num_cells=[64, 64], activation_class=nn.Tanh,
                 device=env.device)
    actor = ProbabilisticActor(
        TensorDictModule(logits, in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"], out_keys=["action"], spec=env.action_spec,
        distribution_class=OneHotCategorical, return_log_prob=True)
    critic = ValueOperator(MLP(in_features=obs, out_features=1, num_cells=[64, 64],
                               activation_class=nn.Tanh, device=env.device),
                           in_keys=["observation"])
    return actor, critic


def episode_returns(batch, groups: torch.Tensor) -> list[float]:
    """Mean return of the episodes that ended in ``batch`` ``[N, T]``, per group (NaN for a
    group none of whose episodes ended); ``groups`` is bool ``[N]``: group 1."""
    done = batch["next", "done"].squeeze(-1).float()               # [N, T]
    ret = batch["next", "episode_return"].squeeze(-1) * done       # valid where done
    out = []
    for member in (~groups, groups):
        m = member.float().unsqueeze(-1)
        out.append(((ret * m).sum() / (done * m).sum()).item())    # one sync per log line
    return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    core = gp.make("CartPole-v1", num_envs=args.num_envs, device=args.device, seed=args.seed)
    env = TorchRLEnv(core, action_encoding="one_hot")   # OneHot actions, as GymWrapper's
    group1 = torch.arange(args.num_envs, device=env.device) >= args.num_envs // 2  # bool [N]
    actor, critic = make_agent(env)

    frames = args.num_envs * args.rollout
    # the policy is not recurrent: it needs no InitTracker or primer on the env (torchrl
    # 0.14 would warn that it might, and 0.15 would add one)
    collector = Collector(env, actor, frames_per_batch=frames,
                          total_frames=frames * args.iterations,
                          auto_register_policy_transforms=False)
    advantage = GAE(gamma=args.gamma, lmbda=args.lam, value_network=critic, average_gae=True)
    loss_fn = ClipPPOLoss(actor, critic, clip_epsilon=args.clip, entropy_coeff=args.entropy,
                          critic_coeff=0.5, loss_critic_type="l2")
    optim = torch.optim.Adam(loss_fn.parameters(), lr=args.lr)
    print(f"TorchRL PPO on gpuparam CartPole-v1: {args.num_envs} envs on {env.device}, "
          f"{args.rollout} steps each per iteration; group 1 = envs "
          f"{args.num_envs // 2}..{args.num_envs - 1}")

    t0 = time.perf_counter()
    for it, batch in enumerate(collector):                 # batch: [N, T]
        if it == args.switch_at:
            # the point of gpuparam: a masked parameter write, the collector keeps running
            env.params.set({"length": args.new_length, "x_threshold": args.new_x_threshold},
                           mask=group1)
            print(f"iter {it:3d} | switch: group 1 -> length {args.new_length} m, x_threshold "
                  f"{args.new_x_threshold} m (group 0 keeps 0.5 m, 2.4 m)")
        with torch.no_grad():
            advantage(batch)                               # "advantage", "value_target"
        flat = batch.reshape(-1)
        size = flat.numel() // args.minibatches
        for _ in range(args.epochs):
            perm = torch.randperm(flat.numel(), device=flat.device)
            for k in range(args.minibatches):
                losses = loss_fn(flat[perm[k * size:(k + 1) * size]])
                loss = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
                optim.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(loss_fn.parameters(), 0.5)
                optim.step()
        collector.update_policy_weights_()
        g0, g1 = episode_returns(batch, group1)
        print(f"iter {it:3d} | env steps {(it + 1) * frames:8,d} | mean episode return "
              f"group 0 {g0:6.1f} group 1 {g1:6.1f} | {time.perf_counter() - t0:5.1f} s")
    collector.shutdown()


if __name__ == "__main__":
    main()
