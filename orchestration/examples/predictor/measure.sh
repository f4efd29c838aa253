#!/bin/sh
# measure.sh: regenerates data/cpu-local as a cgq measurement job: `cgq run
# measure.yaml`, which starts a private Redis, a coordinator, a worker and a
# device runner with this machine's CPU as one device (the built-in cpu-local
# benchmark), then `cgq-predictor export` of its results into the dataset.
# Everything it starts is stopped when the job ends (cgq run).
#
#   orchestration/examples/predictor/measure.sh [BUILD_DIR] [OUT_DIR] [SAMPLES]
#   PER_OP=1 orchestration/examples/predictor/measure.sh ...
#
# PER_OP=1 adds the param per_op: true, so that cpu-local also times every
# node (metric node_ms) and the export writes node-label.csv.gz, the labels
# of the kernel-level predictor (model: kernel).
#
# Defaults: ./build, data/cpu-local beside this script, 200 samples per
# family (1000 graphs, about two minutes on 2 cores). Measure on an idle
# machine: timings taken while other work shares the cores are noise (the
# dataset's label ranks stop following the models' FLOPs).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:-build}/bin" && pwd)
out=${2:-$here/data/cpu-local}
samples=${3:-200}
for b in cgq cgq-coordinator cgq-worker cgq-device-runner cgq-predictor; do
    [ -x "$bin/$b" ] || { echo "measure.sh: $bin/$b not found (build first: make build)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
sed "s/samples: 200/samples: $samples/" "$here/measure.yaml" >"$tmp/measure.yaml"
if [ "${PER_OP:-0}" = 1 ]; then
    sed -i 's/^  seed:   {randint/  per_op: true\n  seed:   {randint/' "$tmp/measure.yaml"
fi
(cd "$tmp" && "$bin/cgq" run measure.yaml --format json --gpus none >results.json)
# The two passes' agreement: the ceiling of a predictor trained on this data.
(cd "$tmp" && "$bin/cgq" results 1 --passes)
"$bin/cgq-predictor" export --results "$tmp/results.json" --out "$out"
