#!/usr/bin/python3
"""bench/predictor.py: figures of the built-in GNN latency predictor on this
machine, printed, never asserted.

1. Epoch time of cgq-predictor against the same model in PyTorch (Debian's
   python3-torch, CPU, one thread each), same data (the committed dataset's
   train split size), same batch size, hidden width, layers, aggregation and
   optimiser, as a ratio in one run. PyTorch's batches are packed once before
   timing (its epochs time only forward, backward and Adam), cgq's epochs
   include packing their batches: the comparison favours PyTorch. Both
   models: today's (`readout: sum`, 32 inputs per node) and issue 29's
   (`readout: additive`, node costs: 34 inputs, the head on every node and
   each graph's nodes summed through log-sum-exp), each against the same
   model in PyTorch, with the target (cgq's epoch no slower than PyTorch's)
   printed as met or not. The PyTorch side's two cost columns are log1p of a
   node's output and input elements, not node.c's FLOPs and bytes: only the
   time of an epoch is compared, and it does not depend on the values.
2. Sustained GFLOP/s of plain OpenBLAS sgemm (through ctypes) on the shape
   of a layer's product, against cgq-predictor's sgemm FLOPs per second of
   training time (everything of an epoch counted as time, so a lower bound).
3. The final SRCC and +-10 % accuracy on the committed dataset, trained
   with the best configuration of `make demo`.

    python3 bench/predictor.py [--build build] [--epochs 5] [--model both]
                               [--max-graphs N] [--no-accuracy]

(--max-graphs and --no-accuracy make a smoke run of a few seconds; its
figures mean nothing.)

python3-torch is installed with apt-get when missing (root or sudo), only
here: the tests never need it. Without it, part 1 is skipped with the reason.
"""

import argparse
import ctypes
import gzip
import json
import math
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DATA = os.path.join(REPO, "orchestration", "examples", "predictor", "data", "cpu-local")
os.environ["OPENBLAS_NUM_THREADS"] = "1"


def cgq_epochs(binary, sets):
    argv = [binary, "train", "--data", DATA, "--json", "--set", "node_costs=false"]
    for k, v in sets.items():
        argv += ["--set", "%s=%s" % (k, v)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        sys.exit("bench/predictor.py: %s failed: %s" % (" ".join(argv), p.stderr[-2000:]))
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    return lines[:-1], lines[-1]


def ensure_torch():
    try:
        import torch  # noqa: F401
        return None
    except ImportError:
        pass
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    r = subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                               "python3-torch"], capture_output=True, text=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    if r.returncode != 0:
        return "python3-torch is not installed and apt-get failed: %s" % r.stderr[-300:]
    try:
        import torch  # noqa: F401
        return None
    except ImportError as e:
        return "python3-torch installed but cannot be imported: %s" % e


def read_csv(name, conv):
    with gzip.open(os.path.join(DATA, name), "rt") as f:
        return [conv(line) for line in f]


def load_graphs(n_train, costs=False):
    """The first n_train graphs, encoded as cgq-predictor encodes them (with
    costs, two more columns of the same scale; see the docstring)."""
    nn = read_csv("num-node-list.csv.gz", int)
    ne = read_csv("num-edge-list.csv.gz", int)
    feats = read_csv("node-feat.csv.gz", lambda s: [float(x) for x in s.split(",")])
    edges = read_csv("edge.csv.gz", lambda s: [int(x) for x in s.split(",")])
    labels = read_csv("graph-label.csv.gz", lambda s: float(s.split(",")[0]))
    graphs, no, eo = [], 0, 0
    for g in range(n_train):
        x = feats[no:no + nn[g]]
        graphs.append((x, edges[eo:eo + ne[g]], math.log(labels[g])))
        no += nn[g]
        eo += ne[g]
    if costs:  # out elements (numbers 12..16), in elements (1..5), nonzero dims
        def elems(dims):
            p = 1.0
            for v in dims:
                p *= v if v > 0 else 1.0
            return p
        graphs = [([r + [elems(r[12:17]), elems(r[1:6])] for r in x], e, y)
                  for x, e, y in graphs]
    shape = [[math.log1p(max(v, 0)) for v in r[1:]] for g in graphs for r in g[0]]
    mean = [sum(c) / len(shape) for c in zip(*shape)]
    std = [math.sqrt(max(sum((v - m) ** 2 for v in c) / len(shape), 0)) or 1.0
           for c, m in zip(zip(*shape), mean)]
    ys = [g[2] for g in graphs]
    ym = sum(ys) / len(ys)
    ysd = math.sqrt(sum((y - ym) ** 2 for y in ys) / len(ys)) or 1.0
    load_graphs.y_std = ysd
    load_graphs.node_shift = math.log(sum(len(g[0]) for g in graphs) / len(graphs))
    out = []
    for x, e, y in graphs:
        rows = []
        for r in x:
            onehot = [0.0] * 16
            onehot[int(r[0])] = 1.0
            rows.append(onehot + [(math.log1p(max(v, 0)) - m) / s
                                  for v, m, s in zip(r[1:], mean, std)])
        out.append((rows, e, (y - ym) / ysd))
    return out


def torch_epoch_time(graphs, hidden, layers, batch, epochs, lr, additive=False):
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    sigma, shift = getattr(load_graphs, "y_std", 1.0), getattr(load_graphs, "node_shift", 0.0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            dims = [len(graphs[0][0][0])] + [hidden] * layers
            self.convs = torch.nn.ModuleList(
                torch.nn.Linear(2 * dims[i], dims[i + 1]) for i in range(layers))
            self.l1 = torch.nn.Linear(hidden, hidden)
            self.l2 = torch.nn.Linear(hidden, 1)

        def forward(self, x, adj, pool):
            h = x
            for conv in self.convs:  # GraphConv, mean aggregation, as cgq's
                h = torch.relu(conv(torch.cat([h, torch.sparse.mm(adj, h)], 1)))
            if additive:  # the head on every node, then log-sum-exp per graph (net.h)
                u = self.l2(torch.relu(self.l1(h))).squeeze(1) * sigma
                idx = pool._indices()[0]
                top = torch.zeros(pool.shape[0]).scatter_reduce(0, idx, u, "amax",
                                                                include_self=False)
                s = torch.zeros(pool.shape[0]).index_add(0, idx, torch.exp(u - top[idx].detach()))
                return (top.detach() + torch.log(s) - shift) / sigma
            g = torch.sparse.mm(pool, h)  # sum readout
            return self.l2(torch.relu(self.l1(g))).squeeze(1)

    batches = []
    for at in range(0, len(graphs), batch):
        part = graphs[at:at + batch]
        xs, rows, cols, vals, prow, pcol, ys, base = [], [], [], [], [], [], [], 0
        for gi, (x, e, y) in enumerate(part):
            xs.extend(x)
            nbr = [[] for _ in x]
            for s, d in e:
                nbr[d].append(s)
                nbr[s].append(d)
            for i, ns in enumerate(nbr):
                for j in ns:
                    rows.append(base + i)
                    cols.append(base + j)
                    vals.append(1.0 / len(ns))
                prow.append(gi)
                pcol.append(base + i)
            ys.append(y)
            base += len(x)
        adj = torch.sparse_coo_tensor([rows, cols], vals, (base, base)).coalesce()
        pool = torch.sparse_coo_tensor([prow, pcol], [1.0] * len(prow), (len(part), base))
        batches.append((torch.tensor(xs), adj, pool.coalesce(), torch.tensor(ys)))
    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    times = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        for x, adj, pool, y in batches:
            opt.zero_grad()
            loss = torch.mean((net(x, adj, pool) - y) ** 2)
            loss.backward()
            opt.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), float(loss)


def sgemm_gflops(m, k, n, seconds=1.0):
    lib = ctypes.CDLL("libopenblas.so.0")
    f = ctypes.c_float
    a = (f * (m * k))(*([0.5] * (m * k)))
    b = (f * (k * n))(*([0.25] * (k * n)))
    c = (f * (m * n))()
    sg = lib.cblas_sgemm
    sg.argtypes = [ctypes.c_int] * 6 + [f, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                         ctypes.c_int, f, ctypes.c_void_p, ctypes.c_int]
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        sg(101, 111, 111, m, n, k, 1.0, a, k, b, n, 0.0, c, n)  # row-major, no transposes
        reps += 1
    return 2.0 * m * k * n * reps / (time.perf_counter() - t0) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--model", choices=["today", "additive", "both"], default="both")
    ap.add_argument("--max-graphs", type=int, default=0, help="a smoke run: the first N graphs")
    ap.add_argument("--no-accuracy", action="store_true", help="skip part 3 (30 epochs)")
    args = ap.parse_args()
    binary = os.path.join(args.build, "bin", "cgq-predictor")
    if not os.access(binary, os.X_OK):
        sys.exit("bench/predictor.py: %s not built (make build)" % binary)
    hidden, layers, batch, lr = 64, 3, 32, 1e-3
    why = ensure_torch()
    models = ["today", "additive"] if args.model == "both" else [args.model]
    for model in models:
        sets = {"hidden": hidden, "layers": layers, "aggregation": "mean", "readout": "sum",
                "batch_size": batch, "epochs": args.epochs, "lr": lr, "val_frac": 0.1,
                "test_frac": 0.1}
        if model == "additive":
            sets.update({"readout": "additive", "node_costs": "true"})
        if args.max_graphs:
            sets["max_graphs"] = args.max_graphs
        epochs, final = cgq_epochs(binary, sets)
        cgq_s = statistics.median(e["epoch_s"] for e in epochs)
        ntrain = final["graphs_train"]
        print("predictor bench, %s model (readout %s%s): %d train graphs, hidden %d, %d layers, "
              "mean aggregation, batch %d, 1 thread" % (
                  model, sets["readout"], ", node costs" if model == "additive" else "", ntrain,
                  hidden, layers, batch))
        print("  cgq-predictor epoch (median of %d)   %8.3f s" % (args.epochs, cgq_s))
        if why:
            print("  PyTorch: skipped (%s)" % why)
        else:
            import torch
            t_s, _ = torch_epoch_time(load_graphs(ntrain, costs=model == "additive"), hidden,
                                      layers, batch, args.epochs, lr,
                                      additive=model == "additive")
            print("  PyTorch %s epoch (median of %d)   %8.3f s" % (torch.__version__, args.epochs,
                                                                 t_s))
            print("  PyTorch / cgq epoch time            %8.2f x  (> 1: cgq is faster)"
                  % (t_s / cgq_s))
            print("  target (cgq epoch <= PyTorch's):    %s" % ("met" if cgq_s <= t_s
                                                               else "NOT met"))
    nodes = 88 * batch  # the dataset's mean graph size x the batch
    print("  OpenBLAS sgemm %d x %d x %d           %8.1f GFLOP/s" % (
        nodes, 2 * hidden, hidden, sgemm_gflops(nodes, 2 * hidden, hidden)))
    print("  cgq-predictor sgemm FLOPs / train time %7.1f GFLOP/s (all of an epoch counted)"
          % final["train_gflops"])
    if args.no_accuracy:
        return
    best = {"hidden": 128, "layers": 2, "aggregation": "sum", "readout": "mean",
            "lr": 0.00202922, "weight_decay": 0.000683167, "dropout": 0.000146138,
            "batch_size": 32, "epochs": 30, "select": "acc10"}
    _, r = cgq_epochs(binary, best)
    print("  the demo's best config, 30 epochs:  val SRCC %.4f, acc10 %.1f %%; test SRCC %.4f, "
          "acc10 %.1f %%, MAPE %.1f %%" % (r["val_srcc"], r["val_acc10"], r["test_srcc"],
                                          r["test_acc10"], r["test_mape"]))


if __name__ == "__main__":
    main()
