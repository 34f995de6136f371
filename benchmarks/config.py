"""What one benchmark run measures: sizes, steps, repeats, derived from the CLI flags."""

from __future__ import annotations

from dataclasses import dataclass

CPU_SIZES = (256, 1024, 4096, 16384, 65536, 262144)
CPU_QUICK_SIZES = (256, 4096, 16384)
CUDA_SIZES = (1024, 16384, 262144, 1048576, 4194304)
CUDA_QUICK_SIZES = (4096, 262144, 1048576)
PEER_SIZES = (8, 32)
PEER_QUICK_SIZES = (8,)
GOAL_N = 16384  # the CPU goals of issues 3, 4 and 6 are stated at this N
LATENCY_SIZES = (4096, 16384)  # issue 5 states its goal at 4096, issue 6 at 16384
DEFAULT_OUTPUT = "runs/benchmarks"  # ignored by git; the committed results: benchmarks/results


@dataclass
class RunConfig:
    """Everything a measurement module needs to know about the run.

    ``steps`` / ``repeats`` of ``None`` mean "derived from N" (see :meth:`steps_for`).
    """

    device: str = "cpu"
    quick: bool = False
    sizes: tuple[int, ...] = ()
    peer_sizes: tuple[int, ...] = ()
    steps: int | None = None
    repeats: int | None = None
    output: str = DEFAULT_OUTPUT
    command: str = ""
    mem_steps: int | None = None
    recreate_repeats: int | None = None
    # TorchRL's default is spawn (unless the user set a global start method); fork is the
    # fastest a user can opt into. Both are measured; goals use the default.
    collector_methods: tuple[str, ...] = ("spawn", "fork")
    threads: int | None = 1  # torch intra-op threads (the CLI's --threads); None: torch's

    def __post_init__(self) -> None:
        cuda = self.device.startswith("cuda")
        if not self.sizes:
            if cuda:
                self.sizes = CUDA_QUICK_SIZES if self.quick else CUDA_SIZES
            else:
                self.sizes = CPU_QUICK_SIZES if self.quick else CPU_SIZES
        if not self.peer_sizes:
            self.peer_sizes = PEER_QUICK_SIZES if self.quick else PEER_SIZES

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def goal_n(self) -> int:
        """N of the same-run goal comparisons (bigger on a GPU, where 16384 is tiny)."""
        return 1048576 if self.is_cuda else GOAL_N

    def steps_for(self, n: int, host: bool = False) -> int:
        """Timed steps per repeat at N envs: about a fixed number of env-steps per repeat.

        ``host=True``: for peers that step on the CPU whatever ``--device`` is (their rate
        does not grow with a GPU, so a CUDA run's step counts would take minutes).
        """
        if self.steps is not None:
            return self.steps
        if self.is_cuda and not host:
            target, lo, hi = (5e8 if self.quick else 2e9), 20, 2000
        else:
            target, lo, hi = (1e6 if self.quick else 4e6), 10, (1000 if self.quick else 4000)
        return int(min(hi, max(lo, round(target / n))))

    def repeats_for(self, kind: str = "sweep") -> int:
        """Timed repeats: ``sweep`` (throughput vs N), ``paired`` (goal ratios), ``peer``."""
        if self.repeats is not None:
            return self.repeats if kind != "peer" else min(self.repeats, 3)
        table = {"sweep": (3, 7), "paired": (7, 15), "peer": (2, 3)}
        return table[kind][0 if self.quick else 1]

    def peer_steps(self) -> int:
        """Timed steps per repeat for the process-per-env peers (slow at any N)."""
        if self.steps is not None:
            return self.steps
        return 50 if self.quick else 150

    def memory_steps(self) -> int:
        """Steps of the steady-state memory run (10k in a full run, as issue 6 asks)."""
        if self.mem_steps is not None:
            return self.mem_steps
        return 1000 if self.quick else 10000

    def collector_repeats(self) -> int:
        """How many times the TorchRL collector recreate (about 1-5 s each) is measured."""
        if self.recreate_repeats is not None:
            return self.recreate_repeats
        return 1 if self.quick else 2
