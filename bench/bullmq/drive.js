#!/usr/bin/env node
// bench/bullmq/drive.js: one run of BullMQ, a peer queue of cgq's `make bench`.
//
//   node drive.js --port P --mode e2e|drain --n N [--concurrency 50]
//                 [--chunk 1000] [--seed S] [--timeout SECONDS]
//
// One Node process holds both the producer (a Queue) and one Worker with
// `concurrency` job slots, against the private redis-server that bench/run
// started on 127.0.0.1:P. The jobs are no-ops: data {x} -> returnvalue
// {x, score: x}, the counterpart of cgq's `kind: noop` trial. Completed jobs
// are kept (BullMQ's default: no removeOnComplete), so every outcome is
// persisted in Redis with its return value, as cgq keeps every trial hash.
//
//   e2e    the worker is running and idle; time from the first addBulk until
//          the worker has completed the N-th job (enqueue included: N jobs
//          added in addBulk calls of --chunk jobs, one after another);
//   drain  the N jobs are added first (untimed); time from worker.run() until
//          it has completed the N-th job.
//
// Before the timed part, the same process runs min(N, 1000) jobs through a
// separate warm-up queue (V8's JIT, ioredis connections, Lua scripts loaded).
// Prints one JSON line of figures; exits 0 unless the arguments are wrong.
'use strict';

const { Queue, Worker } = require('bullmq');

function s_args(argv) {
  const a = { port: 0, mode: '', n: 0, concurrency: 50, chunk: 1000, seed: 1, timeout: 300 };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in a) || i + 1 >= argv.length) {
      throw new Error(`unknown or incomplete argument '${argv[i]}' (expected --port, --mode, ` +
        '--n, --concurrency, --chunk, --seed, --timeout)');
    }
    a[key] = key === 'mode' ? argv[i + 1] : Number(argv[i + 1]);
  }
  if (!a.port || !['e2e', 'drain'].includes(a.mode) || !(a.n > 0)) {
    throw new Error('need --port P, --mode e2e|drain and --n N > 0');
  }
  return a;
}

// A small seeded generator (mulberry32), so a run's x values do not depend on
// Math.random's state.
function s_rng(seed) {
  let t = seed >>> 0;
  return () => {
    t = (t + 0x6d2b79f5) >>> 0;
    let r = Math.imul(t ^ (t >>> 15), 1 | t);
    r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
    return ((r ^ (r >>> 14)) >>> 0) / 4294967296;
  };
}

const now = () => Number(process.hrtime.bigint()) / 1e9;

async function s_add(queue, xs, chunk) {
  for (let i = 0; i < xs.length; i += chunk) {
    await queue.addBulk(xs.slice(i, i + chunk).map((x) => ({ name: 'noop', data: { x } })));
  }
}

// Runs xs through a fresh queue; returns {wall, enqueue, how, counts, bad, ...}:
// enqueue is the addBulk loop's time (part of wall in e2e, before it in drain).
async function s_run(connection, name, xs, a, mode) {
  const queue = new Queue(name, { connection });
  await queue.waitUntilReady();
  let completed = 0;
  let failed = 0;
  let tLast = 0;
  let resolveDone;
  const done = new Promise((resolve) => { resolveDone = resolve; });
  const worker = new Worker(name, async (job) => ({ x: job.data.x, score: job.data.x }),
    { connection, concurrency: a.concurrency, autorun: false });
  worker.on('completed', () => {
    completed += 1;
    if (completed + failed === xs.length) { tLast = now(); resolveDone(); }
  });
  worker.on('failed', () => {
    failed += 1;
    if (completed + failed === xs.length) { tLast = now(); resolveDone(); }
  });
  worker.on('error', (e) => { process.stderr.write(`bullmq worker error: ${e}\n`); });
  await worker.waitUntilReady();

  let t0;
  let enqueue = null;
  if (mode === 'drain') {
    const tAdd = now();
    await s_add(queue, xs, a.chunk);
    enqueue = now() - tAdd; // untimed in this mode
    t0 = now();
    worker.run();
  } else {
    worker.run();
    // let the worker reach its blocking wait for jobs before the clock starts
    while (!worker.isRunning()) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 50));
    t0 = now();
    await s_add(queue, xs, a.chunk);
    enqueue = now() - t0;
  }
  let timer;
  const timedOut = new Promise((resolve) => {
    timer = setTimeout(() => resolve('timeout'), a.timeout * 1000);
  });
  const how = await Promise.race([done, timedOut]);
  clearTimeout(timer);
  const wall = (how === 'timeout' ? now() : tLast) - t0;
  await worker.close();
  const counts = await queue.getJobCounts('completed', 'failed', 'wait', 'active', 'delayed');
  // Check a few stored return values: the outcome really is persisted.
  let bad = null;
  for (let id = 1; id <= xs.length && bad === null; id += Math.max(1, Math.floor(xs.length / 50))) {
    const job = await queue.getJob(String(id));
    if (!job || !job.returnvalue || job.returnvalue.score !== job.data.x) {
      bad = `job ${id}: ${job ? JSON.stringify(job.returnvalue) : 'missing'}`;
    }
  }
  await queue.close();
  return { wall, enqueue, how, counts, bad, completed, failed };
}

async function main() {
  const a = s_args(process.argv.slice(2));
  const connection = { host: '127.0.0.1', port: a.port, maxRetriesPerRequest: null };
  const rnd = s_rng(a.seed);
  const warm = Array.from({ length: Math.min(a.n, 1000) }, () => rnd());
  await s_run(connection, `warm-${a.seed}`, warm, a, 'e2e');
  const xs = Array.from({ length: a.n }, () => rnd());
  const r = await s_run(connection, `bench-${a.seed}`, xs, a, a.mode);
  const succeeded = Number(r.counts.completed || 0);
  let error = null;
  if (r.how === 'timeout') {
    error = `not all jobs done within ${a.timeout}s: ${JSON.stringify(r.counts)}`;
  }
  else if (r.bad) error = `wrong or missing return value: ${r.bad}`;
  else if (succeeded !== a.n) error = `job counts: ${JSON.stringify(r.counts)}`;
  const version = require('bullmq/package.json').version;
  process.stdout.write(JSON.stringify({
    mode: a.mode, n: a.n, succeeded, wall: r.wall, tps: r.wall > 0 ? succeeded / r.wall : 0,
    enqueue_s: r.enqueue, failed: r.failed, done: error === null, error, bullmq: version,
    ioredis: require('ioredis/package.json').version, node: process.version,
  }) + '\n');
}

main().then(() => process.exit(0), (e) => {
  process.stderr.write(`bench/bullmq/drive.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(2);
});
