#!/usr/bin/env bash
# The GPU machine's side of the carry kit (benchmarks/gpu/gpu_kit.py; stdlib Python only):
#
#   bash benchmarks/gpu/gpu_kit.sh stash K     # one command per folder, .whl/K copied along
#   bash benchmarks/gpu/gpu_kit.sh install     # joins, checks SHA-256, installs what is missing
#
# into /tmp/gpuparam-kit/{stash,site} (GPU_KIT_STASH, GPU_KIT_SITE). Exit 3: parts missing;
# exit 2: a bad manifest, folder or argument (one `gpu_kit:` line says which).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec "${PYTHON:-python3}" benchmarks/gpu/gpu_kit.py "$@"
