#!/usr/bin/env bash
# The GPU checks in one command, for a machine with CUDA (run from the repository root):
# the GPU tests first (they also fill Warp's kernel cache for CUDA), then the quick CUDA
# benchmark. Logs and results go to $OUT (default /tmp/gpu_check).
set -u
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'" || exit 2
python -m pytest -m gpu -q -rs --durations=15 2>&1 | tee "$OUT/pytest_gpu.txt"
status=${PIPESTATUS[0]}
python -m benchmarks --device cuda --quick --output "$OUT" > "$OUT/benchmarks.txt" 2>&1
bench=$?
tail -n 60 "$OUT/benchmarks.txt"
echo "pytest -m gpu: exit $status; benchmarks: exit $bench"
[ "$status" -eq 0 ] && [ "$bench" -eq 0 ]
