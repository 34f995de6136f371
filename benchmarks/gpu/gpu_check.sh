#!/usr/bin/env bash
# The GPU check in one budgeted command (benchmarks/gpu/README.md): run from anywhere.
#
#   OUT=/tmp/gpu_check bash benchmarks/gpu/gpu_check.sh       # a CUDA machine, <= 9 minutes
#   OUT=/tmp/d bash benchmarks/gpu/gpu_check.sh --dry-run     # the same sequence on this CPU
#
# gpuparam is imported from this checkout without installing it (a symlink tree in a
# temporary folder adds the `kernels/` folder as gpuparam.kernels, as the wheel does); the
# kit's packages come from $GPU_KIT_SITE (default /tmp/gpuparam-kit/site, filled by
# `bash benchmarks/gpu/gpu_kit.sh install`). The `kit` step (first, unless
# GPU_CHECK_SECTIONS leaves it out) says which site is used; with --dry-run it installs
# .whl/ (if present) into a temporary folder first, the wheels this Python cannot take
# skipped.
#
# The sections and their caps are the table ORDER of benchmarks/gpu/gpu_sections.py. Each
# runs in its own process under its own `timeout`, within one global deadline
# (GPU_CHECK_BUDGET seconds, default 540; 600 for --dry-run: a guard on a busy CPU), in
# order of value (GPU_CHECK_SECTIONS="robots gpu_tests" runs only those, in that order;
# GPU_CHECK_CAPS="go1_train=330 robots=120" overrides caps: whole seconds), and appends
# JSON lines {"section", "ok", ...figures} to $OUT/results.jsonl as it ends: a run killed
# later keeps what it measured. $OUT is a new folder, an empty one, or one holding only an
# earlier check's files; it ends holding at most 9 files: results.jsonl, check.log (every
# section's output), go1_history.json, go1_curve.png, go1_model.pt, go1_policy.pt2 and go1_policy.onnx.
# Every setting is checked before anything is written; a bad one ends with one
# `gpu_check:` line and exit status 2.
set -u
root="$(cd "$(dirname "$0")/../.." && pwd)"
PY="${PYTHON:-python3}"
die() { echo "gpu_check: $*" >&2; exit 2; }

dry=0
case "${1:-}" in
  "") ;;
  --dry-run) dry=1 ;;
  *) die "unknown argument '$1' (expected nothing or --dry-run)" ;;
esac
[ $# -le 1 ] || die "one argument at most (--dry-run), got $#"

# --- the settings, checked before anything is written
is_seconds() { [[ "$1" =~ ^[0-9]+$ ]] && [ "$((10#$1))" -gt 0 ]; }
budget="${GPU_CHECK_BUDGET:-$([ $dry = 1 ] && echo 600 || echo 540)}"
is_seconds "$budget" || die "GPU_CHECK_BUDGET='$budget': expected a whole number of seconds > 0"
budget=$((10#$budget))

table="$(cd "$root" && "$PY" -m benchmarks.gpu.gpu_sections --list)" \
  || die "$PY could not list the sections (benchmarks/gpu/gpu_sections.py)"
mapfile -t sections <<< "$table"   # "name cap_gpu cap_dry module" (module "-": gpu_sections)
names="kit"
for s in "${sections[@]}"; do names="$names ${s%% *}"; done
known() { [[ " $names " == *" $1 "* ]] && [ "$1" != kit ]; }

for c in ${GPU_CHECK_CAPS:-}; do
  [[ "$c" == *=* ]] || die "GPU_CHECK_CAPS: '$c': expected NAME=SECONDS"
  known "${c%%=*}" || die "GPU_CHECK_CAPS: '$c': no section '${c%%=*}'"
  is_seconds "${c#*=}" || die "GPU_CHECK_CAPS: '$c': expected a whole number of seconds > 0"
done

kit=1
if [ -n "${GPU_CHECK_SECTIONS:-}" ]; then  # e.g. "robots gpu_tests": these, in this order
  kit=0
  chosen=()
  for name in $GPU_CHECK_SECTIONS; do
    if [ "$name" = kit ]; then kit=1; continue; fi  # the kit step always runs first
    found=""
    for s in "${sections[@]}"; do [ "${s%% *}" = "$name" ] && found="$s"; done
    [ -z "$found" ] && die "GPU_CHECK_SECTIONS: no section '$name' (the sections: $names)"
    chosen+=("$found")
  done
  sections=("${chosen[@]+"${chosen[@]}"}")
fi

OUT="${OUT:-/tmp/gpu_check}"
[ -e "$OUT" ] && [ ! -d "$OUT" ] && die "OUT=$OUT is a file, not a folder"
mkdir -p -- "$OUT" 2>/dev/null || die "OUT=$OUT cannot be made (a file on its path, or no permission)"
OUT="$(cd -- "$OUT" && pwd)" || die "OUT cannot be entered"
[ -n "$OUT" ] && [ "$OUT" != / ] || die "OUT: expected a folder of its own, not /"
probe="$(mktemp -p "$OUT" .gpu_check.XXXXXX 2>/dev/null)" || die "OUT=$OUT is not writable"
rm -f -- "$probe"
others=$(find "$OUT" -mindepth 1 -maxdepth 1 ! -name results.jsonl ! -name check.log \
  ! -name 'go1_*' -print -quit)
[ -z "$others" ] || die "OUT=$OUT holds '$(basename "$others")', which no check wrote: \
name a new or empty folder"

rm -f -- "$OUT/results.jsonl" "$OUT/check.log" "$OUT"/go1_*
start=$(date +%s)
deadline=$((start + budget))
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
log="$OUT/check.log"
: > "$OUT/results.jsonl"

line() {  # append one JSON line (section, ok, extra JSON fields) and show it
  printf '{"section": "%s", "ok": %s%s}\n' "$1" "$2" "${3:+, $3}" >> "$OUT/results.jsonl"
  tail -n 1 "$OUT/results.jsonl" | cut -c1-800
}

# --- the kit: on the GPU machine installed beforehand; in the dry run from .whl/ now
site="${GPU_KIT_SITE:-/tmp/gpuparam-kit/site}"
[ $dry = 1 ] && site=""  # the dry run: the kit step's temporary site, or this Python's
if [ $dry = 1 ] && [ $kit = 1 ]; then
  site="$tmp/site"
  if ls "$root"/.whl/*/MANIFEST.json >/dev/null 2>&1; then
    ok=true
    for k in $(ls "$root/.whl" | grep -E '^[0-9]+$' | sort -n); do
      "$PY" "$root/benchmarks/gpu/gpu_kit.py" stash "$k" --kit "$root/.whl" \
        --stash "$tmp/stash" >> "$log" 2>&1 || ok=false
    done
    "$PY" "$root/benchmarks/gpu/gpu_kit.py" install --force --stash "$tmp/stash" \
      --target "$site" >> "$log" 2>&1 || ok=false
    rm -rf "$tmp/stash"
    grep '^gpu_kit: ' "$log" | tail -n 40
    line kit "$ok" "\"installed_into\": \"$site\", \"skipped_wheels\": $(grep -c 'skipped$' "$log")"
  else
    echo "no .whl/ here: the kit's install is skipped (bash benchmarks/gpu/gpu_wheels.sh builds it)"
    line kit true '"skipped": "no .whl/ (run benchmarks/gpu/gpu_wheels.sh)"'
  fi
elif [ $kit = 1 ]; then
  found=$([ -d "$site" ] && echo true || echo false)
  [ "$found" = true ] || echo "no $site: using the packages this Python has (gpu_kit.sh install)"
  line kit true "\"site\": \"$site\", \"site_found\": $found"
fi

# --- gpuparam from this checkout, with kernels/ as gpuparam.kernels (the wheel's layout)
src="$tmp/src"
mkdir -p "$src/gpuparam"
for f in "$root"/gpuparam/*; do
  [ "$(basename "$f")" = "__pycache__" ] || ln -s "$f" "$src/gpuparam/"
done
ln -s "$root/kernels" "$src/gpuparam/kernels"
for f in benchmarks tests examples pyproject.toml; do ln -s "$root/$f" "$src/$f"; done
export PYTHONPATH="$src${site:+:$site}${PYTHONPATH:+:$PYTHONPATH}"
export GPU_CHECK_SRC="$src"
cd "$src" || exit 2

flags=()
[ $dry = 1 ] && flags+=(--dry-run)
for s in "${sections[@]+"${sections[@]}"}"; do
  read -r name cap_gpu cap_dry module <<< "$s"
  cap=$([ $dry = 1 ] && echo "$cap_dry" || echo "$cap_gpu")
  for c in ${GPU_CHECK_CAPS:-}; do [ "${c%%=*}" = "$name" ] && cap=$((10#${c#*=})); done
  left=$((deadline - $(date +%s)))
  why="its cap is under 10 s"
  [ "$cap" -gt "$left" ] && cap=$left && why="the global budget is spent"
  if [ "$cap" -lt 10 ]; then
    line "$name" false "\"skipped\": \"$why\""
    continue
  fi
  echo "=== $name (at most $cap s) ===" >> "$log"
  before=$(wc -l < "$OUT/results.jsonl")
  t0=$(date +%s)
  if [ "$module" = - ]; then
    cmd=("$PY" -m benchmarks.gpu.gpu_sections "$name")
  else  # a section of its own module: python -m MODULE --out DIR --budget S [--dry-run]
    cmd=("$PY" -m "$module")
  fi
  timeout -k 5 "$cap" "${cmd[@]}" --out "$OUT" --budget "$cap" "${flags[@]+"${flags[@]}"}" \
    >> "$log" 2>&1
  rc=$?
  new=$(tail -n +"$((before + 1))" "$OUT/results.jsonl")
  if [ $rc != 0 ] && ! grep -q '"ok": false' <<< "$new"; then
    # killed (timeout: 124, or 137 after -k) or crashed before it could say so
    [ -n "$new" ] && cut -c1-800 <<< "$new"
    line "$name" false "\"returncode\": $rc, \"timed_out\": $([ $rc = 124 ] || [ $rc = 137 ] \
      && echo true || echo false), \"seconds\": $(($(date +%s) - t0))"
  elif [ -z "$new" ]; then  # ended well and wrote nothing: its line says so
    line "$name" true "\"seconds\": $(($(date +%s) - t0))"
  else
    cut -c1-800 <<< "$new"
  fi
done

files=$(find "$OUT" -type f | wc -l)
failed=$(grep -c '"ok": false' "$OUT/results.jsonl")
line summary "$([ "$failed" = 0 ] && [ "$files" -le 8 ] && echo true || echo false)" \
  "\"seconds\": $(($(date +%s) - start)), \"failed_sections\": $failed, \"files_in_out\": $files, \"dry_run\": $([ $dry = 1 ] && echo true || echo false)"
[ "$failed" = 0 ] && [ "$files" -le 8 ]
