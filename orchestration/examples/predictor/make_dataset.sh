#!/bin/sh
# make_dataset.sh: regenerates data/cpu-local, the CG dataset the built-in
# predictor is tuned on (tune.yaml): COUNT generated CNN variants of the five
# cg/ families (mobilenetv2, resnet, vgg, shufflenetv2, shufflenet: graph i
# has seed SEED+i and family (SEED+i) mod 5), each labelled with its latency
# measured on this machine's CPU by the cg/ engine (median of 7 timed runs
# after 2 warm-up runs, one OpenBLAS thread), then its FLOPs and parameters.
# Beside the five OGB files it writes graph-family.csv.gz, which the
# predictor's test_family split reads.
#
#   orchestration/examples/predictor/make_dataset.sh [BUILD_DIR] [COUNT] [SEED]
#   NODE_TIMES=1 orchestration/examples/predictor/make_dataset.sh ...
#
# NODE_TIMES=1 also times every node of every model (cgq-cg gen --node-times:
# 7 more runs per model with the clock read around each node) into
# node-label.csv.gz, the labels the kernel-level predictor (model: kernel)
# trains on; OUT=DIR writes somewhere else than data/cpu-local.
#
# Defaults: ./build, 1000 graphs, seed 0; about half a minute on one core of
# the 2-core reference machine. The latencies are this machine's: another
# machine gives other numbers (that is the point of measuring).
#
# The committed data/cpu-local was made by measure.sh, the same kind of
# dataset as a cgq measurement job on the device runner's cpu-local benchmark
# (the same engine code, cg/engine.c). Either way, measure on an idle
# machine: timings taken while other work shares the cores are noise.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
count=${2:-1000}
seed=${3:-0}
out=${OUT:-$here/data/cpu-local}
node_times=
[ "${NODE_TIMES:-0}" = 1 ] && node_times=--node-times
cg="$build/bin/cgq-cg"
[ -x "$cg" ] || { echo "make_dataset.sh: $cg not found (build first: make build)" >&2; exit 2; }
rm -rf "$out.tmp"
OPENBLAS_NUM_THREADS=1 "$cg" gen --family mixed --seed "$seed" --count "$count" --out "$out.tmp" \
    --label latency,flops,params --repeats 7 --warmup 2 --no-models $node_times
python3 - "$out.tmp" "$count" "$seed" <<'PY'
import gzip, sys
out, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fams = ["mobilenetv2", "resnet", "vgg", "shufflenetv2", "shufflenet"]  # cg/gen.h order
with gzip.open(out + "/graph-family.csv.gz", "wt") as f:
    for i in range(count):
        f.write(fams[(seed + i) % 5] + "\n")
PY
rm -rf "$out"
mv "$out.tmp" "$out"
echo "make_dataset.sh: wrote $count graphs to $out"
