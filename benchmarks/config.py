"""What ``python -m benchmarks`` measures, as data: its sections, the sizes of each device,
the gpuparam configurations it times, and the run's settings derived from the CLI flags.

A gpuparam configuration (``GpSetup``) is an env id plus optional randomization (the three
terms of ``rand3``), transforms and hooks; the measurement modules time the configurations
named here against the peers of ``benchmarks/subjects.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import gpuparam as gp

SIZES = {  # (device kind, quick): numbers of envs of the throughput sweep
    ("cpu", False): (256, 1024, 4096, 16384, 65536, 262144),
    ("cpu", True): (256, 4096, 16384),
    ("cuda", False): (1024, 16384, 262144, 1048576, 4194304),
    ("cuda", True): (4096, 262144, 1048576),
}
PEER_SIZES = {False: (8, 32), True: (8,)}  # the process-per-env peers (slow at any N)
GOAL_N = {"cpu": 16384, "cuda": 1048576}  # N of the same-run goal comparisons (issues 3-7)
LATENCY_SIZES = (4096, 16384)  # issue 5 states its goal at 4096, issue 6 at 16384
SECTIONS = {  # results key: "module.function" of benchmarks/ measuring it, run in this order;
    # each takes the RunConfig (the roofline also the throughput measured)
    "budgets": "budgets.measure", "throughput": "throughput.measure",
    "throughput_paired": "throughput.measure_paired", "latency": "host_time.latency",
    "overhead": "throughput.overhead", "stages": "stages.measure",
    "host_time": "host_time.measure", "adapters": "throughput.adapters",
    "training": "training.measure", "memory": "memory.measure",
    "distributed": "distributed.measure", "roofline": "memory.roofline",
    "robots": "robots.measure",
}
PACKAGES = ("gpuparam", "torch", "warp-lang", "tensordict", "numpy", "gymnasium", "torchrl",
            "envpool")  # versions recorded with the machine
DEFAULT_OUTPUT = "runs/benchmarks"  # ignored by git; the committed results: benchmarks/results
# timed steps per repeat: about `target` env-steps, clipped to [lo, hi]
STEP_TARGETS = {("cuda", True): (5e8, 20, 2000), ("cuda", False): (2e9, 20, 2000),
                ("cpu", True): (1e6, 10, 1000), ("cpu", False): (4e6, 10, 4000)}
REPEATS = {"sweep": (7, 3), "paired": (15, 7), "peer": (3, 2)}  # (full, quick)


@dataclass(frozen=True)
class GpSetup:
    """A gpuparam configuration: env id plus optional randomization, transforms and hooks."""

    label: str
    env_id: str = "CartPole-v1"
    randomize: str | None = None  # "step" or "reset": the three terms of randomization_terms
    transforms: tuple[str, ...] = ()  # "ObsNorm", "RewardNorm"
    hooks: bool = False  # one before_step and one after_step hook, one tiny device op each


def randomization_terms(on: str) -> list:
    """``rand3``: three terms on CartPole's ``force_mag``, ``length`` and ``masspole``,
    ``on="step"`` or ``"reset"``; ranges well inside the parameters' valid ranges."""
    return [gp.Gaussian("force_mag", 0.0, 0.5, op="add", on=on),
            gp.Uniform("length", 0.8, 1.2, op="scale", on=on),
            gp.Uniform("masspole", 0.8, 1.2, op="scale", on=on)]


NORMS = ("ObsNorm", "RewardNorm")
BARE = GpSetup("bare")
PENDULUM = GpSetup("bare", env_id="Pendulum-v1")
FULL = GpSetup("rand3(step)+ObsNorm", randomize="step", transforms=("ObsNorm",))
FULLEST = GpSetup("rand3(step)+ObsNorm+RewardNorm", randomize="step", transforms=NORMS)
EVERYTHING = GpSetup("rand3(step)+ObsNorm+RewardNorm+hooks", randomize="step",
                     transforms=NORMS, hooks=True)
RESET_RAND = GpSetup("rand3(reset)", randomize="reset")
NORMS_ONLY = GpSetup("ObsNorm+RewardNorm", transforms=NORMS)
THROUGHPUT = {  # series of the sweep over N
    "gpuparam CartPole-v1": BARE,
    "gpuparam Pendulum-v1": PENDULUM,
    "gpuparam CartPole-v1 rand3(step)+ObsNorm": FULL,
}
OVERHEADS = {  # each timed round by round against BARE
    "reset_randomization_3": RESET_RAND,
    "step_randomization_3": GpSetup("rand3(step)", randomize="step"),
    "ObsNorm": GpSetup("ObsNorm", transforms=("ObsNorm",)),
    "RewardNorm": GpSetup("RewardNorm", transforms=("RewardNorm",)),
    "ObsNorm+RewardNorm": NORMS_ONLY,
    "hooks_before_after": GpSetup("hooks", hooks=True),
}
STAGES = {"bare": BARE, "reset_randomization_3": RESET_RAND, "ObsNorm+RewardNorm": NORMS_ONLY}
# the robots (benchmarks/robots.py): gpuparam against Gymnasium's MuJoCo C envs and against
# envpool's C++ ports of MuJoCo Playground's Go1 tasks, at each N
ROBOTS = ("Ant-v5", "HalfCheetah-v5")
GO1 = ("Go1JoystickFlatTerrain-v1", "Go1JoystickRoughTerrain-v1")
ROBOT_SIZES = {("cpu", False): (16, 64, 256), ("cpu", True): (16, 64),
               ("cuda", False): (1024, 16384, 65536), ("cuda", True): (1024, 16384, 65536)}
ROBOT_OVERHEAD_N = {"cpu": 64, "cuda": 1024}  # Ant's randomization, mass and push costs
GO1_RECIPE_N = {"cpu": 64, "cuda": 8192}  # the GPU goal: the full recipe at 8192, >= 1M/s


@dataclass
class RunConfig:
    """Everything a measurement module needs to know about the run (the CLI's flags).

    ``steps`` / ``repeats`` of ``None`` mean "derived from N" (see :meth:`steps_for`);
    empty sizes and ``None`` counts get the defaults of the device and of ``quick``.
    """

    device: str = "cpu"
    quick: bool = False
    sizes: tuple[int, ...] = ()
    peer_sizes: tuple[int, ...] = ()
    steps: int | None = None
    repeats: int | None = None
    output: str = DEFAULT_OUTPUT
    command: str = ""
    memory_steps: int | None = None  # of the steady-state run (10k in a full run, issue 6)
    recreate_repeats: int | None = None  # TorchRL collector recreates (about 1-5 s each)
    # TorchRL's default is spawn (unless the user set a global start method); fork is the
    # fastest a user can opt into. Both are measured; goals use the default.
    collector_methods: tuple[str, ...] = ("spawn", "fork")
    threads: int | None = 1  # torch intra-op threads (the CLI's --threads); None: torch's

    def __post_init__(self) -> None:
        self.sizes = tuple(self.sizes or SIZES[self.kind, self.quick])
        self.peer_sizes = tuple(self.peer_sizes or PEER_SIZES[self.quick])
        self.collector_methods = tuple(self.collector_methods or ("spawn", "fork"))
        if self.memory_steps is None:
            self.memory_steps = 1000 if self.quick else 10000
        if self.recreate_repeats is None:
            self.recreate_repeats = 1 if self.quick else 2

    @property
    def kind(self) -> str:
        return "cuda" if self.device.startswith("cuda") else "cpu"

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def goal_n(self) -> int:
        """N of the same-run goal comparisons (bigger on a GPU, where 16384 is tiny)."""
        return GOAL_N[self.kind]

    def steps_for(self, n: int, host: bool = False) -> int:
        """Timed steps per repeat at N envs: about a fixed number of env-steps per repeat.

        ``host=True``: for peers that step on the CPU whatever ``--device`` is (their rate
        does not grow with a GPU, so a CUDA run's step counts would take minutes).
        """
        if self.steps is not None:
            return self.steps
        target, lo, hi = STEP_TARGETS["cpu" if host else self.kind, self.quick]
        return int(min(hi, max(lo, round(target / n))))

    def repeats_for(self, kind: str = "sweep") -> int:
        """Timed repeats: ``sweep`` (throughput vs N), ``paired`` (goal ratios), ``peer``."""
        if self.repeats is not None:
            return self.repeats if kind != "peer" else min(self.repeats, 3)
        return REPEATS[kind][self.quick]

    def peer_steps(self) -> int:
        """Timed steps per repeat for the process-per-env peers (slow at any N)."""
        return self.steps if self.steps is not None else (50 if self.quick else 150)
