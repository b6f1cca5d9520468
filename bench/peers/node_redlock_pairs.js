#!/usr/bin/env node
// The pair loop of bench_e2e's `peers` scenario, run with node-redlock 5 (beta)
// over ioredis: acquire + release of a fresh key (TTL 30 s, one attempt) on every
// port given, either one pair at a time or K chains in flight. Prints one JSON
// object on stdout; progress and errors go to stderr.
//
//   node node_redlock_pairs.js --modules DIR --ports P1,P2,... [--inflight K]
//        [--duration-ms D] [--max-pairs N] [--warmup N] [--ttl-ms T] [--auto-pipelining 0|1]
//
// --modules DIR: the node_modules directory holding redlock and ioredis (the
// scenario installs them into a temporary prefix). --inflight 1 (the default) is
// the single-client loop: the next acquire starts when the previous release has
// answered. Every loop is bounded by both --duration-ms and --max-pairs; a hard
// deadline (duration + 20 s) ends the process with status 3 if a call never
// answers. --auto-pipelining 1 sets ioredis' enableAutoPipelining (commands
// issued in one event-loop tick go out in one write); the default is ioredis'
// own default (off).
//
// Output fields: pairs, warmup_pairs (before the measured window), errors, seconds, pairs_per_s, pair_p50_us, pair_p99_us
// (acquire call to release answer), acquire_p50_us, release_p50_us,
// cpu_us_per_pair (process.cpuUsage(), user + system, over the measured window),
// redlock_version, ioredis_version, node_version.
"use strict";

const path = require("path");

function parseArgs(argv) {
  const a = { inflight: 1, durationMs: 2000, maxPairs: 1000000, warmup: 300, ttlMs: 30000, autoPipelining: false };
  for (let i = 2; i < argv.length; ++i) {
    const k = argv[i];
    const v = argv[i + 1];
    if (v === undefined) throw new Error(`${k} needs a value`);
    ++i;
    if (k === "--modules") a.modules = v;
    else if (k === "--ports") a.ports = v.split(",").map((p) => parseInt(p, 10));
    else if (k === "--inflight") a.inflight = parseInt(v, 10);
    else if (k === "--duration-ms") a.durationMs = parseInt(v, 10);
    else if (k === "--max-pairs") a.maxPairs = parseInt(v, 10);
    else if (k === "--warmup") a.warmup = parseInt(v, 10);
    else if (k === "--ttl-ms") a.ttlMs = parseInt(v, 10);
    else if (k === "--auto-pipelining") a.autoPipelining = v === "1";
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.modules) throw new Error("--modules is required");
  if (!a.ports || a.ports.length === 0 || a.ports.some((p) => !(p > 0 && p < 65536)))
    throw new Error("--ports needs a comma-separated list of ports");
  for (const k of ["inflight", "durationMs", "maxPairs", "ttlMs"]) {
    if (!(a[k] > 0)) throw new Error(`bad value for ${k}`);
  }
  if (!(a.warmup >= 0)) throw new Error("bad value for warmup");
  return a;
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));  // nearest rank, as bench/measure.cc
  return sorted[Math.min(rank, sorted.length) - 1];
}

function nowUs() {
  return Number(process.hrtime.bigint()) / 1000;
}

async function main() {
  const args = parseArgs(process.argv);
  // A call that never answers must not hang the benchmark.
  const hard = setTimeout(() => {
    process.stderr.write("node_redlock_pairs: hard deadline passed, exiting\n");
    process.exit(3);
  }, args.durationMs + 20000);
  hard.unref();

  const Redis = require(path.join(args.modules, "ioredis"));
  const redlockModule = require(path.join(args.modules, "redlock"));
  const Redlock = redlockModule.default || redlockModule;
  const versionOf = (name) => require(path.join(args.modules, name, "package.json")).version;

  // ioredis defaults (no command timeout; auto-pipelining off unless asked), as a
  // node-redlock user gets them; a refused connection fails the run instead of
  // retrying.
  const clients = args.ports.map(
    (port) => new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 1,
                          retryStrategy: () => null, enableAutoPipelining: args.autoPipelining }));
  await Promise.all(clients.map((c) => c.connect()));
  // One attempt per acquire (the keys are uncontended); default drift factor.
  const redlock = new Redlock(clients, { retryCount: 0 });

  let seq = 0;
  const prefix = `peers:node:${process.pid}:`;
  const stats = { pairs: 0, errors: 0, pair: [], acquire: [], release: [] };
  let record = false;

  async function onePair() {
    const key = prefix + seq++;
    const t0 = nowUs();
    let lock;
    try {
      lock = await redlock.acquire([key], args.ttlMs);
    } catch (e) {
      if (record) ++stats.errors;
      return;
    }
    const t1 = nowUs();
    try {
      await lock.release();
    } catch (e) {
      if (record) ++stats.errors;
      return;
    }
    const t2 = nowUs();
    if (record) {
      ++stats.pairs;
      stats.pair.push(t2 - t0);
      stats.acquire.push(t1 - t0);
      stats.release.push(t2 - t1);
    }
  }

  // Warm-up: connections settled, the scripts loaded (EVALSHA -> NOSCRIPT -> EVAL).
  const warmDeadline = Date.now() + 5000;
  let warmed = 0;
  for (; warmed < args.warmup && Date.now() < warmDeadline; ++warmed) await onePair();

  record = true;
  let started = 0;
  const cpu0 = process.cpuUsage();
  const t0 = nowUs();
  const until = t0 + args.durationMs * 1000;
  async function chain() {
    while (started < args.maxPairs && nowUs() < until) {
      ++started;
      await onePair();
    }
  }
  const chains = [];
  for (let i = 0; i < args.inflight; ++i) chains.push(chain());
  await Promise.all(chains);
  const seconds = (nowUs() - t0) / 1e6;
  const cpu = process.cpuUsage(cpu0);
  record = false;

  const byNumber = (x, y) => x - y;
  stats.pair.sort(byNumber);
  stats.acquire.sort(byNumber);
  stats.release.sort(byNumber);
  const out = {
    inflight: args.inflight,
    auto_pipelining: args.autoPipelining,
    nodes: args.ports.length,
    pairs: stats.pairs,
    warmup_pairs: warmed,
    errors: stats.errors,
    seconds,
    pairs_per_s: seconds > 0 ? stats.pairs / seconds : 0,
    pair_p50_us: percentile(stats.pair, 50),
    pair_p99_us: percentile(stats.pair, 99),
    acquire_p50_us: percentile(stats.acquire, 50),
    release_p50_us: percentile(stats.release, 50),
    cpu_us_per_pair: stats.pairs > 0 ? (cpu.user + cpu.system) / stats.pairs : 0,
    redlock_version: versionOf("redlock"),
    ioredis_version: versionOf("ioredis"),
    node_version: process.versions.node,
  };
  process.stdout.write(JSON.stringify(out) + "\n");
  await Promise.all(clients.map((c) => c.quit().catch(() => {})));
  clearTimeout(hard);
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`node_redlock_pairs: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  });
