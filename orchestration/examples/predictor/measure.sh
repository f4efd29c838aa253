#!/bin/sh
# measure.sh: regenerates data/cpu-local as a cgq measurement job: a private
# redis-server, cgq-coordinator and cgq-device-runner (runner.yaml: the CPU
# as device cpu0) on loopback, `cgq submit measure.yaml --follow`, then
# `cgq results J --format json | cgq-predictor export` into the dataset.
# Everything it starts is stopped by PID on exit.
#
#   orchestration/examples/predictor/measure.sh [BUILD_DIR] [OUT_DIR] [SAMPLES]
#
# Defaults: ./build, data/cpu-local beside this script, 200 samples per
# family (1000 graphs, a couple of minutes on 2 cores). make_dataset.sh does
# the same measurements inside cgq-cg, without a cluster.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:-build}/bin" && pwd)
out=${2:-$here/data/cpu-local}
samples=${3:-200}
for b in cgq cgq-coordinator cgq-device-runner cgq-predictor; do
    [ -x "$bin/$b" ] || { echo "measure.sh: $bin/$b not found (build first: make build)" >&2; exit 2; }
done
tmp=$(mktemp -d)
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rport=$(port); nport=$(port); cport=$(port)
redis-server --port "$rport" --bind 127.0.0.1 --dir "$tmp" --save '' --appendonly no \
    >"$tmp/redis.log" 2>&1 &
pids="$pids $!"
until redis-cli -p "$rport" ping >/dev/null 2>&1; do sleep 0.1; done
export CGQ_REDIS="redis://127.0.0.1:$rport/0" CGQ_COORDINATOR="tcp://127.0.0.1:$cport"
"$bin/cgq-coordinator" --bind "tcp://127.0.0.1:$nport" --control "$CGQ_COORDINATOR" \
    >"$tmp/coordinator.log" 2>&1 &
pids="$pids $!"
until grep -q "cgq-coordinator ready" "$tmp/coordinator.log"; do sleep 0.1; done
OPENBLAS_NUM_THREADS=1 "$bin/cgq-device-runner" --config "$here/runner.yaml" \
    --coordinator "tcp://127.0.0.1:$nport" --id measure-cpu >"$tmp/runner.log" 2>&1 &
pids="$pids $!"
sed "s/samples: 200/samples: $samples/" "$here/measure.yaml" >"$tmp/measure.yaml"
job=$("$bin/cgq" submit "$tmp/measure.yaml" | grep -o '[0-9][0-9]*' | head -1)
[ -n "$job" ] || { echo "measure.sh: cgq submit failed" >&2; exit 1; }
while :; do
    state=$(redis-cli -p "$rport" HGET "cgq:job:{$job}" state)
    case "$state" in finished | cancelled | failed) break ;; esac
    kill -0 $pids 2>/dev/null || { echo "measure.sh: a daemon exited; logs in $tmp" >&2; cat "$tmp"/*.log >&2; exit 1; }
    sleep 1
done
"$bin/cgq" results "$job" --format json >"$tmp/results.json"
"$bin/cgq-predictor" export --results "$tmp/results.json" --out "$out"
