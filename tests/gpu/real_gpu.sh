#!/bin/sh
# real_gpu.sh: cgq on a real NVIDIA GPU. The rest of the suite runs on fake
# GPUs (--gpus fake:N); this script is what runs where nvidia-smi answers, and
# exits 77 (skipped, with the reason) everywhere else.
#
#   tests/gpu/real_gpu.sh [BIN_DIR] [HOLD]
#
# BIN_DIR holds cgq, cgq-coordinator, cgq-worker (default build/bin); HOLD is
# hold.cu built with nvcc (optional: without it step 3 is skipped). It needs
# redis-server and redis-cli on PATH. Everything runs on loopback in a
# temporary directory, and every process it starts is stopped by PID.
#
# 1. `--gpus auto` offers exactly the GPUs nvidia-smi lists.
# 2. Trials asking gpu: 0.5 share a GPU two at a time, never more, each sees
#    one valid CUDA_VISIBLE_DEVICES index and can query that GPU.
# 3. A trial whose background grandchild holds GPU memory: the worker is
#    killed -9; the holder must die with it (its memory freed on the GPU), the
#    trial re-runs on a restarted worker and succeeds once.
set -u
bin=$(cd "${1:-build/bin}" && pwd) || exit 2
hold=${2:-}
fail=0
say() { echo "real_gpu: $*"; }
bad() { echo "real_gpu: FAIL: $*"; fail=1; }

command -v nvidia-smi >/dev/null 2>&1 || { say "skipped: no nvidia-smi on PATH (no GPU here)"; exit 77; }
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "$ngpu" -ge 1 ] || { say "skipped: nvidia-smi lists no GPU"; exit 77; }
for b in redis-server redis-cli; do
    command -v $b >/dev/null 2>&1 || { say "skipped: $b not on PATH"; exit 77; }
done

tmp=$(mktemp -d)
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null; done
    sleep 0.5
    for p in $pids; do kill -9 "$p" 2>/dev/null; done
    [ "$fail" = 0 ] && rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
r() { redis-cli -p "$rport" "$@"; }
# A free loopback port: redis-server exits at once on a taken one, so try a few.
for k in 1 2 3 4 5 6 7 8; do
    rport=$(( 20000 + ($$ * 7 + k * 1231) % 30000 ))
    redis-server --port "$rport" --bind 127.0.0.1 --dir "$tmp" --save '' --appendonly yes \
        >"$tmp/redis.log" 2>&1 &
    rpid=$!
    i=0; until r ping >/dev/null 2>&1; do
        i=$((i+1)); kill -0 $rpid 2>/dev/null && [ $i -lt 50 ] || break; sleep 0.1
    done
    r ping >/dev/null 2>&1 && break
    kill $rpid 2>/dev/null; rpid=""
done
[ -n "$rpid" ] || { bad "redis-server did not start: $(tail -3 "$tmp/redis.log")"; exit 1; }
pids="$pids $rpid"

"$bin/cgq-coordinator" --redis "redis://127.0.0.1:$rport/0" --bind tcp://127.0.0.1:0 \
    --control tcp://127.0.0.1:0 --heartbeat 200ms >"$tmp/coord.out" 2>"$tmp/coord.log" &
pids="$pids $!"
i=0; until grep -q "cgq-coordinator ready" "$tmp/coord.out"; do
    i=$((i+1)); [ $i -gt 100 ] && { bad "coordinator not ready"; cat "$tmp/coord.log"; exit 1; }; sleep 0.1
done
nodes=$(sed -n 's/.*nodes=\([^ ]*\).*/\1/p' "$tmp/coord.out")
export CGQ_REDIS="redis://127.0.0.1:$rport/0"
export CGQ_COORDINATOR=$(sed -n 's/.*control=\([^ ]*\).*/\1/p' "$tmp/coord.out")

wpid=""
start_worker() {
    "$bin/cgq-worker" --coordinator "$nodes" --id gpubox --cpus 8 --gpus auto \
        --workdir "$tmp/work" --kill-grace 1s >>"$tmp/worker.log" 2>&1 &
    wpid=$!
    pids="$pids $wpid"
    i=0; until [ "$(r HGET cgq:node:gpubox state)" = alive ]; do
        i=$((i+1)); [ $i -gt 200 ] && { bad "worker not alive"; cat "$tmp/worker.log"; exit 1; }; sleep 0.1
    done
}
start_worker

# 1. --gpus auto offers what nvidia-smi lists.
say "nvidia-smi: $(nvidia-smi -L | head -4 | tr '\n' ';')"
say "node: $(r HGETALL cgq:node:gpubox | tr '\n' ' ' | cut -c1-400)"
"$bin/cgq" workers
offered=$(r HGET cgq:node:gpubox gpus)
nidx=$(echo "$offered" | tr -cd ',' | wc -c)
case "$offered" in ''|'[]') n=0 ;; \[*) n=$(echo "$offered" | grep -o '[0-9][0-9]*' | wc -l) ;;
    *,*) n=$((nidx + 1)) ;; *) n=$offered ;; esac  # a count, a list, or indices
[ "$n" -eq "$ngpu" ] && say "ok: --gpus auto offers $n GPU(s) (gpus=$offered)" \
    || bad "--gpus auto offers '$offered', nvidia-smi lists $ngpu"

# 2. Half-GPU trials share a GPU two at a time.
cat >"$tmp/half.sh" <<'T'
#!/bin/sh
s=$(date +%s.%N)
cuda=none
if [ -n "${HOLD:-}" ]; then  # a real CUDA context: which device does this trial see?
    "$HOLD" 64 2 "$CGQ_SPEC_DIR/cuda-$CGQ_TRIAL_ID" && cuda=$(cut -d' ' -f2,3 "$CGQ_SPEC_DIR/cuda-$CGQ_TRIAL_ID")
else
    sleep 2
fi
name=$(nvidia-smi -i "$CUDA_VISIBLE_DEVICES" --query-gpu=pci.bus_id,name --format=csv,noheader 2>&1 | head -1)
e=$(date +%s.%N)
echo "$CGQ_TRIAL_ID $CUDA_VISIBLE_DEVICES $s $e $cuda $name" >>"$CGQ_SPEC_DIR/half.rec"
echo '{"score": 1}' >&3
T
n2=$((ngpu * 4))
cat >"$tmp/half.yaml" <<Y
name: real-gpu-half
space: {i: {grid: [$(seq -s, 1 $n2)]}}
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: sh {spec_dir}/half.sh
  resources: {gpu: 0.5, cpu: 1}
  timeout: 60s
  env: {HOLD: "$([ -x "$hold" ] && echo "$hold")"}
Y
timeout 120 "$bin/cgq" submit "$tmp/half.yaml" --follow >"$tmp/half.out" 2>&1 || { bad "half-GPU job did not succeed"; cat "$tmp/half.out"; }
lines=$(wc -l <"$tmp/half.rec" 2>/dev/null || echo 0)
[ "$lines" -eq "$n2" ] && say "ok: $n2 half-GPU trials ran" || bad "$lines of $n2 half-GPU trials recorded"
# Peak overlap per GPU index, from the start/end times.
peak=$(awk '{print $3, 1, $2; print $4, -1, $2}' "$tmp/half.rec" | sort -k1,1n -k2,2n |
    awk '{c[$3]+=$2; if (c[$3]>m) m=c[$3]} END {print m+0}')
[ "$peak" -le 2 ] && say "ok: at most $peak half-GPU trials at once on one GPU" || bad "$peak trials shared one GPU"
[ "$peak" -eq 2 ] && say "ok: two half-GPU trials did share a GPU" || bad "half-GPU trials never shared a GPU (peak $peak)"
badcvd=$(awk -v n="$ngpu" '$2 !~ /^[0-9]+$/ || $2 >= n' "$tmp/half.rec" | wc -l)
[ "$badcvd" -eq 0 ] && say "ok: every trial saw one valid CUDA_VISIBLE_DEVICES" || bad "$badcvd trials saw a bad CUDA_VISIBLE_DEVICES"
# Fields 5-6: CUDA's device count and bus id (or "none"); 7: nvidia-smi's
# bus id of the index in CUDA_VISIBLE_DEVICES ("00000000:18:00.0" against
# CUDA's "0000:18:00.0": compare from the bus number on).
if [ -n "$hold" ] && [ -x "$hold" ]; then
    wrong=$(awk '{b=tolower($7); sub(/^[0-9a-f]*:/, "", b); sub(/,$/, "", b); c=tolower($6); sub(/^[0-9a-f]*:/, "", c)
                  if ($5 != 1 || b != c) print}' "$tmp/half.rec")
    [ -z "$wrong" ] && say "ok: CUDA in each trial saw exactly its one GPU ($(head -1 "$tmp/half.rec" | cut -d' ' -f5-))" \
        || bad "CUDA saw the wrong GPUs: $wrong"
else
    grep -q ' none ' "$tmp/half.rec" && [ "$(awk '$6 ~ /:/' "$tmp/half.rec" | wc -l)" -eq "$n2" ] \
        && say "ok: trials queried their GPU: $(head -1 "$tmp/half.rec" | cut -d' ' -f6- | cut -c1-60)" \
        || bad "nvidia-smi -i CUDA_VISIBLE_DEVICES failed in a trial: $(head -1 "$tmp/half.rec")"
fi

# 3. A GPU-holding grandchild dies with a killed worker.
if [ -n "$hold" ] && [ -x "$hold" ]; then
    cat >"$tmp/holder.sh" <<T
#!/bin/sh
echo "\$CGQ_ATTEMPT" >>"\$CGQ_SPEC_DIR/holder.attempts"
if [ "\$CGQ_ATTEMPT" = 1 ]; then
    setsid $hold 1024 120 "\$CGQ_SPEC_DIR/holder.pid" </dev/null >/dev/null 2>&1 &
    sleep 120
fi
echo '{"score": 1}' >&3
T
    cat >"$tmp/holder.yaml" <<Y
name: real-gpu-holder
space: {i: {grid: [1]}}
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: sh {spec_dir}/holder.sh
  resources: {gpu: 1, cpu: 1}
  timeout: 300s
Y
    "$bin/cgq" submit "$tmp/holder.yaml" >"$tmp/holder.out" 2>&1
    i=0; until [ -s "$tmp/holder.pid" ]; do
        i=$((i+1)); [ $i -gt 300 ] && break; sleep 0.1
    done
    hpid=$(cut -d" " -f1 "$tmp/holder.pid" 2>/dev/null)
    if [ -z "$hpid" ]; then
        bad "the holder never started: $(cat "$tmp/worker.log" | tail -5)"
    else
        say "holder pid $hpid: $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tr '\n' ';')"
        kill -9 "$wpid"
        i=0; while kill -0 "$hpid" 2>/dev/null; do i=$((i+1)); [ $i -gt 100 ] && break; sleep 0.1; done
        if kill -0 "$hpid" 2>/dev/null; then
            bad "the GPU holder $hpid outlived its killed worker by 10 s"
            kill -9 "$hpid"
        else
            say "ok: the GPU holder died with its worker (in $((i * 100)) ms)"
        fi
        i=0; while nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -qw "$hpid"; do
            i=$((i+1)); [ $i -gt 100 ] && break; sleep 0.1
        done
        nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -qw "$hpid" \
            && bad "GPU memory of $hpid still held" || say "ok: its GPU memory was freed"
        grep -i "confine" "$tmp/worker.log" | head -2
        start_worker
        job=$(grep -o '[0-9][0-9]*' "$tmp/holder.out" | head -1)
        i=0; until [ "$(r HGET "cgq:job:{$job}" state)" = finished ]; do
            i=$((i+1)); [ $i -gt 600 ] && break; sleep 0.1
        done
        st=$(r HGET "cgq:job:{$job}" state)
        att=$(tr '\n' ' ' <"$tmp/holder.attempts")
        [ "$st" = finished ] && say "ok: the trial re-ran (attempts: $att) and the job finished" \
            || bad "holder job is '$st' (attempts: $att)"
    fi
else
    say "step 3 skipped: no hold binary (build tests/gpu/hold.cu with nvcc)"
fi
[ "$fail" = 0 ] && say "all checks passed" || { say "logs kept in $tmp"; tail -n 20 "$tmp/worker.log" "$tmp/coord.log"; find "$tmp/work" -name "*.log" | head -3 | xargs tail -n 5; }
exit $fail
