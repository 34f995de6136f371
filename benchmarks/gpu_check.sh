#!/usr/bin/env bash
# The GPU check in one budgeted command (docs/gpu.md): run from the repository root.
#
#   OUT=/tmp/gpu_check bash benchmarks/gpu_check.sh            # a CUDA machine, <= 9 minutes
#   OUT=d bash benchmarks/gpu_check.sh --dry-run               # the same sequence on this CPU
#
# gpuparam is imported from this checkout without installing it (a symlink tree in a
# temporary folder adds the `kernels/` folder as gpuparam.kernels, as the wheel does); the
# kit's packages come from $GPU_KIT_SITE (default /tmp/gpuparam-kit/site, filled by
# `bash benchmarks/gpu_kit.sh install`). --dry-run installs .whl/ (if present) into a
# temporary folder first, with the wheels this Python cannot take skipped.
#
# Each section (benchmarks/gpu_sections.py) runs under its own `timeout`, within one global
# deadline (GPU_CHECK_BUDGET seconds, default 540; 600 for --dry-run: a guard on a busy CPU),
# in order of value (GPU_CHECK_SECTIONS="robots gpu_tests" runs only those, in that order;
# GPU_CHECK_CAPS="go1_train=330 robots=120" overrides caps), and appends one JSON line
# {"section", "ok", ...figures} to $OUT/results.jsonl as it ends: a run killed later keeps
# what it measured. $OUT holds at most 8 files: results.jsonl, check.log (every section's
# output), go1_history.json, go1_curve.png, go1_model.pt and go1_policy.pt.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
dry=0
[ "${1:-}" = "--dry-run" ] && dry=1
OUT="${OUT:-/tmp/gpu_check}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -f "$OUT/results.jsonl" "$OUT/check.log" "$OUT"/go1_*
start=$(date +%s)
budget="${GPU_CHECK_BUDGET:-$([ $dry = 1 ] && echo 600 || echo 540)}"
deadline=$((start + budget))
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
log="$OUT/check.log"

line() {  # append one JSON line (section, ok, extra JSON fields) and show it
  printf '{"section": "%s", "ok": %s%s}\n' "$1" "$2" "${3:+, $3}" >> "$OUT/results.jsonl"
  tail -n 1 "$OUT/results.jsonl" | cut -c1-800
}

# --- the kit: on the GPU machine installed beforehand; in the dry run from .whl/ now
site="${GPU_KIT_SITE:-/tmp/gpuparam-kit/site}"
if [ $dry = 1 ]; then
  site="$tmp/site"
  if ls "$root"/.whl/*/MANIFEST.json >/dev/null 2>&1; then
    ok=true
    for k in $(ls "$root/.whl" | sort -n); do
      GPU_KIT_STASH="$tmp/stash" "$PY" "$root/benchmarks/gpu_kit.py" stash "$k" \
        --kit "$root/.whl" >> "$log" 2>&1 || ok=false
    done
    "$PY" "$root/benchmarks/gpu_kit.py" install --force --stash "$tmp/stash" \
      --target "$site" >> "$log" 2>&1 || ok=false
    rm -rf "$tmp/stash"
    grep '^gpu_kit: ' "$log" | tail -n 40
    line kit "$ok" "\"installed_into\": \"$site\", \"skipped_wheels\": $(grep -c 'skipped$' "$log")"
  else
    echo "no .whl/ here: the kit's install is skipped (bash benchmarks/gpu_wheels.sh builds it)"
    line kit true '"skipped": "no .whl/ (run benchmarks/gpu_wheels.sh)"'
  fi
elif [ ! -d "$site" ]; then
  echo "no $site: using the packages this Python has (bash benchmarks/gpu_kit.sh install)"
fi

# --- gpuparam from this checkout, with kernels/ as gpuparam.kernels (the wheel's layout)
src="$tmp/src"
mkdir -p "$src/gpuparam"
for f in "$root"/gpuparam/*; do
  [ "$(basename "$f")" = "__pycache__" ] || ln -s "$f" "$src/gpuparam/"
done
ln -s "$root/kernels" "$src/gpuparam/kernels"
for f in benchmarks tests examples pyproject.toml; do ln -s "$root/$f" "$src/$f"; done
export PYTHONPATH="$src:$site${PYTHONPATH:+:$PYTHONPATH}"
export GPU_CHECK_SRC="$src"
cd "$src" || exit 2

flags=()
[ $dry = 1 ] && flags+=(--dry-run)
# name and cap in seconds (GPU / dry run), in order of value; docs/gpu.md has the estimate
# (caps from the first H200 runs, docs/gpu.md: gpu_tests took 202 s, robots 133 s)
sections=(
  "versions 30 30" "smoke 90 60" "gpu_tests 240 90" "sweep 75 60" "masked_write 30 40"
  "recaptures 60 60" "mempool 40 40" "robots 200 90" "graph_counts 90 60"
  "go1_train 120 90"
)
if [ -n "${GPU_CHECK_SECTIONS:-}" ]; then  # e.g. "robots gpu_tests": these, in this order
  chosen=()
  for name in $GPU_CHECK_SECTIONS; do
    found=""
    for s in "${sections[@]}"; do [ "${s%% *}" = "$name" ] && found="$s"; done
    [ -z "$found" ] && { echo "GPU_CHECK_SECTIONS: no section '$name'" >&2; exit 2; }
    chosen+=("$found")
  done
  sections=("${chosen[@]}")
fi
for s in "${sections[@]}"; do
  read -r name cap_gpu cap_dry <<< "$s"
  cap=$([ $dry = 1 ] && echo "$cap_dry" || echo "$cap_gpu")
  for c in ${GPU_CHECK_CAPS:-}; do [ "${c%%=*}" = "$name" ] && cap="${c#*=}"; done
  left=$((deadline - $(date +%s)))
  why="its cap is under 10 s"
  [ "$cap" -gt "$left" ] && cap=$left && why="the global budget is spent"
  if [ "$cap" -lt 10 ]; then
    line "$name" false "\"skipped\": \"$why\""
    continue
  fi
  echo "=== $name (at most $cap s) ===" >> "$log"
  before=$(wc -l < "$OUT/results.jsonl" 2>/dev/null || echo 0)
  t0=$(date +%s)
  timeout -k 5 "$cap" "$PY" -m benchmarks.gpu_sections "$name" --out "$OUT" \
    --budget "$cap" "${flags[@]}" >> "$log" 2>&1
  rc=$?
  after=$(wc -l < "$OUT/results.jsonl" 2>/dev/null || echo 0)
  if [ "$after" -gt "$before" ]; then
    tail -n 1 "$OUT/results.jsonl" | cut -c1-800
  else  # killed (timeout: 124, or 137 after -k) or crashed before it could write
    line "$name" false "\"returncode\": $rc, \"timed_out\": $([ $rc = 124 ] || [ $rc = 137 ] \
      && echo true || echo false), \"seconds\": $(($(date +%s) - t0))"
  fi
done

files=$(find "$OUT" -type f | wc -l)
failed=$(grep -c '"ok": false' "$OUT/results.jsonl")
line summary "$([ "$failed" = 0 ] && [ "$files" -le 8 ] && echo true || echo false)" \
  "\"seconds\": $(($(date +%s) - start)), \"failed_sections\": $failed, \"files_in_out\": $files, \"dry_run\": $([ $dry = 1 ] && echo true || echo false)"
[ "$failed" = 0 ] && [ "$files" -le 8 ]
