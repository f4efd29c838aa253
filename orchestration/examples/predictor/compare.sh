#!/bin/sh
# compare.sh: the kernel-level predictor (model: kernel, forests and gbt) and
# the GNN (today's: readout sum, no node costs; issue 29's: readout additive
# with node costs, without and with the node-time loss) on the same splits
# of one CG dataset with node times: for split
# seeds 0..SEEDS-1 (val 10 %, test 10 %, or a held-out family) it trains each
# and prints the test acc10 / MAPE / SRCC of every run and their means, the
# table docs/predictor.md asks for (issue 29). Put the dataset's pass-to-pass
# agreement (its ceiling) beside it when you report it.
#
#   orchestration/examples/predictor/compare.sh [BUILD_DIR] DATA_DIR [SEEDS] [GNN_EPOCHS] [FAMILY]
#
# Defaults: ./build, 5 seeds, 50 GNN epochs, no held-out family. Training
# is CPU-bound: run it on an idle machine for training times, on any for
# accuracy (the splits and models are deterministic).
set -eu
build=${1:-build}
data=${2:?usage: compare.sh [BUILD_DIR] DATA_DIR [SEEDS] [GNN_EPOCHS] [FAMILY]}
seeds=${3:-5}
epochs=${4:-50}
family=${5:-}
pred="$build/bin/cgq-predictor"
[ -x "$pred" ] || { echo "compare.sh: $pred not found (build first: make build)" >&2; exit 2; }
[ -f "$data/node-label.csv.gz" ] || {
    echo "compare.sh: $data has no node-label.csv.gz (make it with make_dataset.sh NODE_TIMES=1)" >&2
    exit 2
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
s=0
while [ "$s" -lt "$seeds" ]; do
    for m in kernel-forest kernel-gbt gnn gnn-additive gnn-additive-node; do
        case $m in
            kernel-forest) set -- --set model=kernel ;;
            kernel-gbt) set -- --set model=kernel --set regressor=gbt --set n_estimators=200 ;;
            gnn) set -- --set epochs="$epochs" --set select=acc10 --set readout=sum \
                --set node_costs=false ;;
            gnn-additive) set -- --set epochs="$epochs" --set select=acc10 \
                --set readout=additive --set node_costs=true ;;
            gnn-additive-node) set -- --set epochs="$epochs" --set select=acc10 \
                --set readout=additive --set node_costs=true --set node_loss=0.5 ;;
        esac
        [ -n "$family" ] && set -- "$@" --set test_family="$family"
        OPENBLAS_NUM_THREADS=1 "$pred" train --data "$data" --set seed="$s" "$@" --json |
            tail -n 1 | sed "s/^/$m $s /" >>"$tmp/runs"
    done
    s=$((s + 1))
done
python3 - "$tmp/runs" <<'PY'
import json, sys
rows = {}
print("%-18s %4s %8s %8s %8s" % ("model", "seed", "acc10", "mape", "srcc"))
for line in open(sys.argv[1]):
    model, seed, doc = line.split(" ", 2)
    r = json.loads(doc)
    rows.setdefault(model, []).append(r)
    print("%-18s %4s %8.1f %8.2f %8.4f" % (model, seed, r["test_acc10"], r["test_mape"],
                                         r["test_srcc"]))
print()
for model, rs in rows.items():
    n = len(rs)
    print("%-18s mean %8.1f %8.2f %8.4f  (%d splits)" % (
        model, sum(r["test_acc10"] for r in rs) / n, sum(r["test_mape"] for r in rs) / n,
        sum(r["test_srcc"] for r in rs) / n, n))
PY
# The baselines on the same splits (a per-family linear fit, a random forest
# on aggregated op features), where scikit-learn is installed.
py=${PYTHON:-python3}
if "$py" -c 'import sklearn' 2>/dev/null; then
    echo
    set -- --bin-dir "$build/bin" --data "$data" --seeds "$seeds"
    [ -n "$family" ] && set -- "$@" --family "$family"
    "$py" "$(dirname "$0")/../../../bench/predictor_baselines.py" "$@"
else
    echo "compare.sh: no scikit-learn for $py (python3-sklearn): baselines left out" >&2
fi
