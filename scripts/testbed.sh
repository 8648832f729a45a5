#!/usr/bin/env bash
# A test bed on one machine with real shaped links and CPU shares (root).
#
#   scripts/testbed.sh NAME:MBIT:CPU% [NAME:MBIT:CPU% ...] -- COMMAND [ARGS...]
#
# For every worker: a network namespace with a veth pair to the host
# (10.213.<i>.1 on the host side, 10.213.<i>.2 inside), a token-bucket rate
# limit of MBIT megabits per second on both ends (tc tbf), and a dls-worker
# daemon inside the namespace whose computing is capped at CPU% of one core
# (cgroup v1 cpu controller on its kernel threads, or v2 cpu.max on the
# whole daemon). Then COMMAND runs on the host with
# DLS_TESTBED_CLUSTER naming a cluster file of those workers and DLS_TOKEN
# set. DLS_TESTBED_WORKER_ARGS adds arguments to every dls-worker (e.g.
# "--work-factor 100": a slower processor, so that CPU shares of a few
# percent are enough to make computing cost what it did in the report).
# For example:
#
#   sudo scripts/testbed.sh w1:800:60 w2:400:30 w3:200:90 -- \
#     sh -c 'target/release/dls run --cluster "$DLS_TESTBED_CLUSTER" --batch 400 --size 128'
#
# Topology: by default every worker has a private link to the host, as in
# the report. With DLS_TESTBED_SWITCH=MBIT the host reaches the workers
# through one full-duplex uplink of MBIT megabits per second each way to
# a bridge (a switch, in a namespace of its own), and each worker's own
# link (MBIT of its spec) hangs off the bridge: concurrent transfers share
# the uplink, each no faster than its own link. The host is 10.214.0.1,
# worker i 10.214.0.<i+10>.
#
# DLS_TESTBED_CAP=process caps each worker's whole daemon at its CPU%
# (networking included, as a node with that share of a core), instead of
# its kernel threads only. DLS_TESTBED_DASK=1 also starts, in each
# worker's namespace and cgroup, a one-thread Dask worker (`dask worker`,
# from PyPI's distributed) for a scheduler that listens on the host's
# port 8786; DLS_TESTBED_SCHEDULER then holds its address (see
# scripts/peer-dask.py, which shuts Dask down before dls runs: an idle
# Dask worker's periodic work takes much of a small CPU share).
#
# Traffic goes only between the host and these namespaces. Everything is
# removed on exit (namespaces, links, cgroups, daemons), also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

specs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do specs+=("$1"); shift; done
[ "${1:-}" = "--" ] || { echo "usage: $0 NAME:MBIT:CPU% ... -- COMMAND" >&2; exit 2; }
shift
[ ${#specs[@]} -gt 0 ] && [ $# -gt 0 ] || { echo "usage: $0 NAME:MBIT:CPU% ... -- COMMAND" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "$0: needs root (ip netns, tc, cgroups)" >&2; exit 2; }

cargo build --release -q -p dls-master -p dls-worker
worker_bin=$(pwd)/target/release/dls-worker
dir=$(mktemp -d)
tag=dlstb$$
pids=()
cgroups=()

cleanup() {
  set +e
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  sleep 0.2
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  for i in "${!specs[@]}"; do ip netns del "$tag-$i" 2>/dev/null; done
  ip netns del "$tag-sw" 2>/dev/null
  ip link del "tbu$$" 2>/dev/null
  # A cgroup can be removed once its killed processes are gone: wait for
  # them (a second at most), else the directories outlive the test bed.
  for _ in $(seq 20); do
    for i in "${!cgroups[@]}"; do rmdir "${cgroups[$i]}" 2>/dev/null && unset "cgroups[$i]"; done
    [ ${#cgroups[@]} = 0 ] && break
    sleep 0.05
  done
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

cpu_cgroup() { # name percent: make a cgroup capped at percent of one core, path in $cg
  # Short periods keep the cap smooth: a worker under a 100 ms period computes
  # in bursts at full speed, then waits. The kernel's smallest quota is 1 ms,
  # so the period is 10 ms, or longer for shares under 10%.
  local name=$1 pct=$2 path period quota
  period=$(( pct >= 10 ? 10000 : (100000 + pct - 1) / pct ))
  quota=$(( pct * period / 100 ))
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    path=/sys/fs/cgroup/$name
    mkdir -p "$path"
    echo "$quota $period" >"$path/cpu.max"
  else
    path=/sys/fs/cgroup/cpu/$name
    mkdir -p "$path"
    echo "$period" >"$path/cpu.cfs_period_us"
    echo "$quota" >"$path/cpu.cfs_quota_us"
  fi
  cgroups+=("$path")
  cg=$path
}

# The quota caps the worker's computing: its kernel threads (dls-kernel-N),
# not its networking, which the link's own rate limit models (the report's
# model has separate costs for the two). Under cgroup v1 threads can be
# placed one by one; under v2 the whole daemon is capped (a note says so).
cap_computing() { # pid cgroup name
  local pid=$1 cg=$2 name=$3 tries=0 t placed=0
  if [ "${DLS_TESTBED_CAP:-}" = process ]; then
    cap_process "$pid" "$cg"
    return
  fi
  if [ -f "$cg/cgroup.procs" ] && [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo "$pid" >"$cg/cgroup.procs"
    echo "note: cgroup v2: the CPU quota of $name covers its networking too" >&2
    return
  fi
  while [ $placed = 0 ] && [ $tries -lt 50 ]; do
    for t in /proc/"$pid"/task/*; do
      if grep -q '^dls-kernel-' "$t/comm" 2>/dev/null; then
        echo "${t##*/}" >"$cg/tasks"
        placed=1
      fi
    done
    [ $placed = 1 ] || { tries=$((tries + 1)); sleep 0.1; }
  done
  [ $placed = 1 ] || { echo "$0: worker $name: no kernel thread to cap" >&2; exit 1; }
}

cap_process() { # pid cgroup: every thread of the process, now and later
  local pid=$1 cg=$2
  if [ -f "$cg/cgroup.procs" ]; then
    echo "$pid" >"$cg/cgroup.procs"
  else
    echo "$pid" >"$cg/tasks"
  fi
}

shape() { # [netns] device mbit: a token bucket on what leaves the device
  local ns=()
  [ $# = 3 ] && { ns=(-n "$1"); shift; }
  tc "${ns[@]}" qdisc add dev "$1" root tbf rate "${2}mbit" burst 64kb latency "${DLS_TESTBED_QUEUE_MS:-50}ms"
}

switch=${DLS_TESTBED_SWITCH:-}
case "$switch" in *[!0-9]* | 0) echo "$0: DLS_TESTBED_SWITCH must be a whole number of Mbit/s, at least 1" >&2; exit 2 ;; esac
case "${DLS_TESTBED_QUEUE_MS:-50}" in '' | *[!0-9]* | 0) echo "$0: DLS_TESTBED_QUEUE_MS must be a whole number of ms, at least 1" >&2; exit 2 ;; esac
case "${DLS_TESTBED_CAP:-}" in '' | process) ;; *) echo "$0: DLS_TESTBED_CAP: unknown value ${DLS_TESTBED_CAP} (only: process)" >&2; exit 2 ;; esac
if [ -n "$switch" ]; then
  # The uplink: host end tbu$$ (10.214.0.1), switch end on the bridge.
  ip netns add "$tag-sw"
  ip -n "$tag-sw" link add br0 type bridge
  ip -n "$tag-sw" link set br0 up
  ip link add "tbu$$" type veth peer name up0
  ip link set up0 netns "$tag-sw"
  ip -n "$tag-sw" link set up0 master br0
  ip -n "$tag-sw" link set up0 up
  ip addr add 10.214.0.1/24 dev "tbu$$"
  ip link set "tbu$$" up
  shape "tbu$$" "$switch"
  shape "$tag-sw" up0 "$switch"
  echo "switch: one full-duplex uplink of $switch Mbit/s from the host (10.214.0.1)" >&2
fi
if [ -n "${DLS_TESTBED_DASK:-}" ]; then
  command -v dask >/dev/null || { echo "$0: DLS_TESTBED_DASK needs Dask (pip install distributed)" >&2; exit 2; }
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
    dask scheduler --host 0.0.0.0 --port 8786 --dashboard-address :0 >"$dir/scheduler.out" 2>&1 &
  pids+=($!)
  sleep 2
  if [ -n "$switch" ]; then scheduler_host=10.214.0.1; else scheduler_host=127.0.0.1; fi
  export DLS_TESTBED_SCHEDULER=tcp://$scheduler_host:8786
fi

(umask 077 && head -c 32 /dev/urandom | base64 >"$dir/token")
echo "# test bed of $$" >"$dir/cluster.toml"
for i in "${!specs[@]}"; do
  IFS=: read -r name mbit cpu <<<"${specs[$i]}"
  case "$mbit$cpu" in *[!0-9]* | "") echo "$0: bad worker spec ${specs[$i]} (want NAME:MBIT:CPU%, whole numbers)" >&2; exit 2 ;; esac
  [ "$cpu" -ge 1 ] && [ "$cpu" -le 100 ] && [ "$mbit" -ge 1 ] || { echo "$0: ${specs[$i]}: MBIT must be >= 1 and CPU% from 1 to 100" >&2; exit 2; }
  ns=$tag-$i host=tbh$$-$i inner=tbn$$-$i
  ip netns add "$ns"
  ip link add "$host" type veth peer name "$inner"
  ip link set "$inner" netns "$ns"
  if [ -n "$switch" ]; then
    # The worker's link hangs off the bridge.
    addr=10.214.0.$((i + 10)) gateway=10.214.0.1
    ip link set "$host" netns "$tag-sw"
    ip -n "$tag-sw" link set "$host" master br0
    ip -n "$tag-sw" link set "$host" up
    ip -n "$ns" addr add "$addr/24" dev "$inner"
    shape "$tag-sw" "$host" "$mbit"
  else
    addr=10.213.$i.2 gateway=10.213.$i.1
    ip addr add "10.213.$i.1/30" dev "$host"
    ip link set "$host" up
    ip -n "$ns" addr add "$addr/30" dev "$inner"
    # Token bucket each way: MBIT megabits per second, a burst of 64 KiB.
    shape "$host" "$mbit"
  fi
  ip -n "$ns" link set "$inner" up
  ip -n "$ns" link set lo up
  shape "$ns" "$inner" "$mbit"
  cpu_cgroup "$ns" "$cpu"
  if [ -n "${DLS_TESTBED_DASK:-}" ]; then
    ip netns exec "$ns" env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
      dask worker "tcp://$gateway:8786" --nworkers 1 --nthreads 1 --host "$addr" --name "$name" \
      --no-dashboard >"$dir/$name.dask.out" 2>&1 &
    pids+=($!)
    cap_process "$!" "$cg"
  fi
  # shellcheck disable=SC2086 # extra arguments are split on purpose
  ip netns exec "$ns" "$worker_bin" --listen "$addr:7070" --threads 1 --isolate-compute --token-file "$dir/token" \
    ${DLS_TESTBED_WORKER_ARGS:-} \
    >"$dir/$name.out" 2>"$dir/$name.err" &
  pid=$!
  pids+=("$pid")
  cap_computing "$pid" "$cg" "$name"
  printf '\n[[worker]]\nname = "%s"\naddress = "%s:7070"\n' "$name" "$addr" >>"$dir/cluster.toml"
  echo "worker $name: $addr:7070, ${mbit} Mbit/s, ${cpu}% of a core" >&2
done
sleep 0.5
for i in "${!pids[@]}"; do
  kill -0 "${pids[$i]}" 2>/dev/null || { echo "worker ${specs[$i]} did not start:" >&2; cat "$dir"/*.err >&2; exit 1; }
done

export DLS_TESTBED_CLUSTER=$dir/cluster.toml
DLS_TOKEN=$(cat "$dir/token")
export DLS_TOKEN
"$@"
