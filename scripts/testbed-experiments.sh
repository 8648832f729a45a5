#!/usr/bin/env bash
# The report's experiments on the test bed (root), platform by platform:
#
#   sudo scripts/testbed-experiments.sh OUT [PLATFORMS]
#
# A speed s (1 to 10, 1 the slowest, as in the report) is a link of
# s × MBIT1 Mbit/s (tc tbf) and s × CPU1 percent of a core (cgroup quota),
# built by scripts/testbed.sh; every worker computes each product K times
# over (dls-worker --work-factor), K chosen from this machine's kernel speed
# so that sending a unit at speed 1 costs RATIO times computing it at speed
# 1, as in the report's set-up. Real TCP and real CPU shares make the
# heterogeneity; K only makes all processors uniformly slower.
#
# Runs, all appended to OUT/KIND.json (OUT must not hold results yet):
#   heuristics: PLATFORMS random platforms of each family (homogeneous bus,
#     heterogeneous bus, heterogeneous star), one test bed each;
#   baselines: on each heterogeneous star, in the same test bed;
#   linearity: on the first heterogeneous star;
#   participation: section 5.3.4's platform with x = 1 and x = 3 (at
#     PARTICIPATION_RATIO, see docs/experiments/README.md).
# OUT/testbed.txt records the parameters and every platform's workers.
#
# Environment (defaults): DLS_TB_SIZE (128), DLS_TB_BATCH (200),
# DLS_TB_MBIT1 (80), DLS_TB_CPU1 (3), DLS_TB_RATIO (0.1),
# DLS_TB_PARTICIPATION_RATIO (0.15), DLS_TB_SEED (1), DLS_TB_ONLY (the
# experiments to run, space-separated; all four by default; the platforms
# drawn are the same whichever run).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-}
platforms=${2:-5}
[ -n "$out" ] || { echo "usage: $0 OUT [PLATFORMS]" >&2; exit 2; }
case "$platforms" in '' | *[!0-9]* | 0) echo "$0: PLATFORMS must be a whole number >= 1" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "$0: needs root (it runs scripts/testbed.sh)" >&2; exit 2; }
only=${DLS_TB_ONLY:-heuristics baselines linearity participation}
wants() { case " $only " in *" $1 "*) return 0 ;; esac; return 1; }
for kind in $only; do
  case $kind in heuristics | baselines | linearity | participation) ;; *)
    echo "$0: DLS_TB_ONLY: unknown experiment $kind" >&2; exit 2 ;; esac
  [ ! -e "$out/$kind.json" ] || { echo "$0: $out already holds $kind.json; give an empty directory" >&2; exit 2; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)

size=${DLS_TB_SIZE:-128}
batch=${DLS_TB_BATCH:-200}
mbit1=${DLS_TB_MBIT1:-80}
cpu1=${DLS_TB_CPU1:-3}
ratio=${DLS_TB_RATIO:-0.1}
pratio=${DLS_TB_PARTICIPATION_RATIO:-0.15}
seed=${DLS_TB_SEED:-1}
[ $((10 * cpu1)) -le 100 ] || { echo "$0: DLS_TB_CPU1 × 10 must be at most 100 (% of a core)" >&2; exit 2; }

cargo build --release -q -p dls-master -p dls-worker
dls=$(pwd)/target/release/dls
gflops=$(target/release/dls-worker bench --size "$size" --threads 1 --json |
  sed -n 's/.*"gflops":\([0-9.eE+-]*\).*/\1/p')
[ -n "$gflops" ] || { echo "$0: could not read the kernel's speed from dls-worker bench" >&2; exit 1; }

# A unit sends 16·n² bytes and computes 2·n³ flops, so at speed 1
# c/w = 64 · G · share / (n · rate · K); solve for K.
work_factor() {
  awk -v g="$gflops" -v s="$cpu1" -v r="$1" -v n="$size" -v m="$mbit1" \
    'BEGIN { k = 64 * g * 1e9 * s / 100 / (r * n * m * 1e6); printf "%d\n", (k < 1 ? 1 : k + 0.5) }'
}
k_heur=$(work_factor "$ratio")
k_part=$(work_factor "$pratio")

log=$out/testbed.txt
{
  echo "# test bed experiments, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "size $size, batch $batch, speed s = s*$mbit1 Mbit/s and s*$cpu1% of a core"
  echo "kernel $gflops GFLOP/s at n = $size on one thread"
  echo "work factor $k_heur (c/w at speed 1 = $ratio), participation $k_part (c/w = $pratio)"
} >"$log"
cat "$log" >&2

RANDOM=$seed
draw() { s=$((RANDOM % 10 + 1)); } # no subshell: $RANDOM must advance here

# testbed KIND-LABEL WORK-FACTOR "c:w ..." NAME-PREFIX -- COMMAND...: one test bed.
testbed() {
  local label=$1 k=$2 speeds=$3 prefix=$4
  shift 5
  local specs=() i=0 pair
  for pair in $speeds; do
    i=$((i + 1))
    specs+=("$prefix$i:$((${pair%%:*} * mbit1)):$((${pair##*:} * cpu1))")
  done
  echo "$label: speeds $speeds -> ${specs[*]} (work factor $k)" | tee -a "$log" >&2
  DLS_TESTBED_WORKER_ARGS="--work-factor $k" scripts/testbed.sh "${specs[@]}" -- "$@"
}

common=(--size "$size" --batch "$batch" --out "$out" --append)
for family in homogeneous-bus heterogeneous-bus heterogeneous-star; do
  for p in $(seq 0 $((platforms - 1))); do
    speeds=""
    draw; c=$s; draw; w=$s
    for _ in 1 2 3 4; do
      case $family in
        heterogeneous-bus) draw; w=$s ;;
        heterogeneous-star) draw; c=$s; draw; w=$s ;;
      esac
      speeds="$speeds $c:$w"
    done
    speeds=${speeds# }
    label=$(echo "$speeds" | tr ' ' ',')
    script=true
    if wants heuristics; then
      script="$script"' && "$0" experiment heuristics --cluster "$DLS_TESTBED_CLUSTER" --platforms 1 "$@"'
    fi
    if [ "$family" = heterogeneous-star ]; then
      if wants baselines; then
        script="$script"' && "$0" experiment baselines --cluster "$DLS_TESTBED_CLUSTER" "$@"'
      fi
      if [ "$p" = 0 ] && wants linearity; then
        script="$script"' && "$0" experiment linearity --cluster "$DLS_TESTBED_CLUSTER" "$@"'
      fi
    fi
    [ "$script" != true ] || continue
    testbed "$family #$p" "$k_heur" "$speeds" w -- bash -c "$script" "$dls" \
      --family "$family" --speeds "$label" "${common[@]}"
  done
done

for x in 1 3; do
  wants participation || break
  testbed "participation x = $x" "$k_part" "10:9 8:9 8:10 $x:1" P -- bash -c \
    '"$0" experiment participation --cluster "$DLS_TESTBED_CLUSTER" "$@"' "$dls" --x "$x" "${common[@]}"
done
echo "results in $out" >&2
