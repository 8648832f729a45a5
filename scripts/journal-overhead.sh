#!/usr/bin/env bash
# What journalling costs a run (docs/reliability.md): the same batch of
# small products, multi-round so that results arrive all along, on two
# workers on loopback, alternately with each of two commands; medians of
# the measured makespans and their ratio.
#
#   scripts/journal-overhead.sh [BATCH] [SIZE] [ROUNDS]   (default 100000 16 7)
#
# By default it compares `dls run --output` (C written in place and
# journalled) with `dls run` keeping no C (an upper bound on the journal's
# cost: it also pays for writing C). With BASELINE=path/to/dls (a build
# from before the journal), it compares `--output` of both builds: the
# journal's own cost.
set -euo pipefail
batch=${1:-100000}
size=${2:-16}
rounds=${3:-7}
bin=${DLS_BIN:-target/release}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
for w in 1 2; do
  "$bin/dls-worker" --listen 127.0.0.1:0 --threads 1 >"$dir/w$w.out" 2>/dev/null &
done
sleep 0.5
workers=$(cat "$dir"/w*.out | awk '{print $NF}' | paste -sd, -)
"$bin/dls" calibrate --workers "$workers" --size "$size" -o "$dir/p.toml" 2>/dev/null
run() { # DLS OUTPUT-FLAGS...
  local dls=$1; shift
  rm -f "$dir/c.npy"
  "$dls" run --workers "$workers" --platform "$dir/p.toml" --batch "$batch" --size "$size" \
    --strategy rounds --verify 0 --json "$@" 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["measured_makespan"])'
}
if [ -n "${BASELINE:-}" ]; then
  label="--output, build without the journal ($BASELINE)"
  base() { run "$BASELINE" --output "$dir/c.npy"; }
else
  label="no --output (C not kept)"
  base() { run "$bin/dls"; }
fi
ours=(); theirs=()
for _ in $(seq "$rounds"); do
  theirs+=("$(base)")
  ours+=("$(run "$bin/dls" --output "$dir/c.npy")")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
m_ours=$(median "${ours[@]}"); m_theirs=$(median "${theirs[@]}")
[ -n "${VERBOSE:-}" ] && paste <(printf "%s\n" "${ours[@]}") <(printf "%s\n" "${theirs[@]}")
echo "$batch products of ${size}x${size}, rounds, $rounds runs each, medians of the measured makespan:"
echo "  --output, journalled: $m_ours s"
echo "  $label: $m_theirs s"
python3 -c "print('  ratio: %.4f' % ($m_ours / $m_theirs))"
