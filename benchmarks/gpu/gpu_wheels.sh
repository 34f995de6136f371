#!/usr/bin/env bash
# Download, here, what the air-gapped GPU machine lacks (cp312 manylinux x86_64 wheels of
# warp-lang, MuJoCo Warp, MuJoCo, tensordict, Gymnasium, rsl_rl, pytest, matplotlib and what
# they import) and split it into .whl/1, .whl/2, ... (ignored by git): each folder plus the
# working tree fits one command's 64 MiB, no file is over 60 MiB. Downloads and the
# repacked warp-lang are cached in ~/.cache/gpuparam/gpu_kit (the first run compresses
# warp-lang's libraries for a few minutes). benchmarks/gpu/README.md gives the commands
# on the GPU machine.
#
#   bash benchmarks/gpu/gpu_wheels.sh [--python-version 3.12]
set -euo pipefail
cd "$(dirname "$0")/../.."
exec "${PYTHON:-python3}" benchmarks/gpu/gpu_kit.py pack "$@"
