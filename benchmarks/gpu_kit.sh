#!/usr/bin/env bash
# The GPU machine's side of the carry kit (benchmarks/gpu_kit.py; stdlib Python only):
#
#   bash benchmarks/gpu_kit.sh stash K     # one call per folder, with carry=[".whl/K"]
#   bash benchmarks/gpu_kit.sh install     # joins, checks SHA-256, pip installs what is missing
#
# into /tmp/gpuparam-kit/{stash,site} (GPU_KIT_STASH, GPU_KIT_SITE). Exit 3: parts missing.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" benchmarks/gpu_kit.py "$@"
