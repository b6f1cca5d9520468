// node-redlock (npm redlock 5.0.0-beta.2, ioredis 5) on the nodes of a test, driven by
// tests/interop/interop_test.cc. Loopback only.
//
//   node node_redlock.js hold RESOURCE TTL_MS PORT...
//     acquires RESOURCE once; prints "held <token>" or "contended <message>";
//     when held, waits for SIGTERM, then releases and prints "released" (the release
//     reached a quorum) or "release failed <message>", and exits.
//   node node_redlock.js try RESOURCE TTL_MS PORT...
//     acquires RESOURCE once; prints "acquired <token>" (and releases it) or
//     "contended <message>", and exits.
//
// Exit status: 0 as described, 1 on a usage or connection error, 3 when a release failed.
"use strict";

const Redis = require("ioredis");
const Redlock = require("redlock").default;

function out(line) {
  process.stdout.write(line + "\n");
}

// Installed first: a SIGTERM that comes right after "held" must not find the
// default action (exit without releasing).
const terminated = new Promise((resolve) => process.once("SIGTERM", resolve));

async function main() {
  const [mode, resource, ttlText, ...ports] = process.argv.slice(2);
  const ttl = Number(ttlText);
  if (!["hold", "try"].includes(mode) || !resource || !Number.isInteger(ttl) || ports.length === 0) {
    process.stderr.write("usage: node_redlock.js hold|try RESOURCE TTL_MS PORT...\n");
    return 1;
  }
  const clients = ports.map(
    (p) => new Redis({ host: "127.0.0.1", port: Number(p), maxRetriesPerRequest: 1, connectTimeout: 2000 })
  );
  const redlock = new Redlock(clients, { retryCount: 0 });
  let code = 0;
  try {
    let lock;
    try {
      lock = await redlock.acquire([resource], ttl);
    } catch (e) {
      out("contended " + String(e.message).replace(/\n/g, " "));
      return 0;
    }
    if (mode === "try") {
      out("acquired " + lock.value);
      await lock.release();
      return 0;
    }
    out("held " + lock.value);
    await terminated;
    try {
      await lock.release();
      out("released");
    } catch (e) {
      out("release failed " + String(e.message).replace(/\n/g, " "));
      code = 3;
    }
    return code;
  } finally {
    await Promise.all(clients.map((c) => c.quit().catch(() => {})));
  }
}

main().then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write("node_redlock.js: " + (e && e.stack ? e.stack : e) + "\n");
    process.exit(1);
  }
);
