#!/usr/bin/env bash
# A dls batch on a Slurm allocation: one dls-worker per node for the length
# of the job, wait until every worker answers, run the batch, stop the
# workers. Arguments are passed to `dls run` (e.g. --input A.npy B.npy
# --output C.npy, or --batch 2000 --size 256).
#
#   sbatch --nodes=4 --ntasks-per-node=1 configs/slurm-batch.sh --batch 2000 --size 256 --output C.npy
#
# The master runs where the script runs (the job's first node). The token
# file must be readable by you only (chmod 600) and reachable from every node.
#
# With --output, a job that runs out of time (Slurm sends SIGTERM) keeps
# the results received beside the output (.C.npy.dls-partial and its
# journal): submit it again with the same arguments and it computes only
# the products missing. DLS_WORKER_ARGS adds flags to every dls-worker
# (say "--threads 8 --memory-limit 64G").
#SBATCH --job-name=dls
#SBATCH --ntasks-per-node=1
#SBATCH --time=01:00:00
set -euo pipefail

port=${DLS_WORKER_PORT:-7070}
token=${DLS_TOKEN_FILE:-$HOME/.dls-token}
wait_secs=${DLS_WAIT:-60}

# One daemon per node, in the background for the whole job.
# shellcheck disable=SC2086 # DLS_WORKER_ARGS is a list of flags
srun --ntasks-per-node=1 --kill-on-bad-exit=0 \
  dls-worker --listen "0.0.0.0:$port" --token-file "$token" ${DLS_WORKER_ARGS:-} &
workers=$!
stop_workers() {
  kill "$workers" 2>/dev/null || true
  wait "$workers" 2>/dev/null || true
}
trap stop_workers EXIT

dls status --slurm --worker-port "$port" --token-file "$token" --wait "$wait_secs"
dls run --slurm --worker-port "$port" --token-file "$token" "$@"
