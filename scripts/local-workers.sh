# Sourced by the measurement scripts: start `dls-worker` daemons on
# loopback and wait until each says where it listens.
#
#   start_workers DIR "ARGS OF WORKER 0" "ARGS OF WORKER 1" ...
#
# Appends their PIDs to PIDS (the caller kills them on exit) and sets
# WORKERS to their addresses, comma-separated. Uses target/release.
start_workers() {
  local dir=$1
  shift
  local i=0 addrs=() a
  for spec in "$@"; do
    # shellcheck disable=SC2086 # the spec is a list of flags
    target/release/dls-worker --listen 127.0.0.1:0 $spec >"$dir/w$i.log" 2>&1 &
    PIDS+=($!)
    i=$((i + 1))
  done
  for ((j = 0; j < i; j++)); do
    a=
    for _ in $(seq 100); do
      a=$(grep -ao 'listening on [0-9.:]*' "$dir/w$j.log" | awk '{print $3}' || true)
      [[ -n "$a" ]] && break
      sleep 0.1
    done
    [[ -n "$a" ]] || { echo "worker $j did not start: $(cat "$dir/w$j.log")" >&2; return 1; }
    addrs+=("$a")
  done
  WORKERS=$(IFS=,; echo "${addrs[*]}")
}
