/*
 * redlock.pml: the Redlock protocol as this library implements it, for SPIN.
 *
 * One parameterised model: acquire with rollback, extend (to the same or a shorter
 * TTL), release, the fencing commit and a fenced resource, on N independent nodes
 * with C clients, under message loss and delay, key expiry on drifting node clocks,
 * client pauses and node crash-restarts with or without their data.
 * docs/verification.md maps every process and variable to the code, states every
 * assumption and shows the counter-examples; tools/check-model.sh runs the
 * configurations CI checks. By hand:
 *
 *   spin -a -DN=3 -DC=2 redlock.pml && gcc -O2 -DSAFETY -o pan pan.c && ./pan -m100000
 *   spin -t -T -DN=3 -DC=2 redlock.pml      (replays pan's trail as readable lines)
 *
 * Time is discrete: `now` counts ticks on the client's clock, and all that happens
 * within a tick happens at that instant. The unit is such that the client's drift
 * allowance (drift_of: ttl * clock_drift_factor + 2 ms) is DRIFT ticks.
 *
 * Switches (-D on the spin command line). Defaults are the library's behaviour:
 *   N, C          nodes (3 or 5), clients (2 or 3)
 *   MAXT          the last tick
 *   ACQS          acquire attempts per client (failed ones count)
 *   EXTS          extensions per holding;  OVERLAP 1: a second one may start while
 *                 the first is undecided (the watchdog and extend() overlapping)
 *   DELAYS        requests that stay in flight, to be executed at any later moment
 *   LOSSES        lost requests (a lost reply = a request delayed past its round)
 *   RESTARTS      node crash-restarts;  RESTART_DATA 1 they keep their data
 *                 (appendonly, appendfsync always), 2 they come back empty, 3 either
 *   GUARD         1 the restart guard (restart_quarantine = max_ttl); 0 off
 *   TIME_SAMPLE   1 a TIME is pipelined behind each acquire (clock-jump guard on and
 *                 TIME permitted), so the guard also judges each grant at its reply
 *   FENCE         1 fenced acquires and a fenced resource;  STALE_WRITES late
 *                 resource writes per run;  CHECK_FENCE_ORDER 0 leaves out the
 *                 monotonicity assertion (the resource's own check remains)
 *   NAIVE_FENCE   0 the library's commit phase; 1 the max of per-node INCRs;
 *                 2 1 + max of the counters without the commit phase
 *   EARLY, LATE   a node's clock may end a TTL up to EARLY ticks early, LATE late
 *   LOWER_ON_EXTEND  1 begin_extension lowers validity to min(valid_until,
 *                 now + ttl - drift) before an extension is sent; 0 the old code
 *   LATEST_ONLY   1 only the latest extension sent may raise validity; 0 any may
 *   TTL, SHORT, DRIFT  the acquire TTL (= max_ttl), the shorter extension TTL, the
 *                 drift allowance, in ticks
 */

/* ================================================================== parameters */
#ifndef N
#define N 3
#endif
#ifndef C
#define C 2
#endif
#ifndef MAXT
#define MAXT 5
#endif
#ifndef ACQS
#define ACQS 2
#endif
#ifndef EXTS
#define EXTS 1
#endif
#ifndef OVERLAP
#define OVERLAP 0
#endif
#ifndef DELAYS
#define DELAYS 1
#endif
#ifndef LOSSES
#define LOSSES 1
#endif
#ifndef RESTARTS
#define RESTARTS 1
#endif
#ifndef RESTART_DATA
#define RESTART_DATA 3
#endif
#ifndef GUARD
#define GUARD 1
#endif
#ifndef TIME_SAMPLE
#define TIME_SAMPLE 1
#endif
#ifndef FENCE
#define FENCE 0
#endif
#ifndef STALE_WRITES
#define STALE_WRITES 1
#endif
#ifndef CHECK_FENCE_ORDER
#define CHECK_FENCE_ORDER 1
#endif
#ifndef NAIVE_FENCE
#define NAIVE_FENCE 0
#endif
#ifndef EARLY
#define EARLY 1
#endif
#ifndef LATE
#define LATE 0
#endif
#ifndef LOWER_ON_EXTEND
#define LOWER_ON_EXTEND 1
#endif
#ifndef LATEST_ONLY
#define LATEST_ONLY 1
#endif
#ifndef TTL
#define TTL 4
#endif
#ifndef SHORT
#define SHORT 2
#endif
#ifndef DRIFT
#define DRIFT 1
#endif

/* Reachability probes (tools/check-model.sh): -DPROBE=k adds one assertion that
 * says "event k never happens"; the checker must find it happening in the positive
 * configuration named, which shows that configuration is not vacuous. */
#ifndef PROBE
#define PROBE 0
#endif
#define PROBE_HANDOVER 1       /* a client holds the lock after another one held it */
#define PROBE_RESTARTED_VOTE 2 /* a grant by a node that came back empty counts (its quarantine over) */
#define PROBE_GUARD_EXCLUDES 3 /* the guard keeps a restarted node out of an acquire */
#define PROBE_EXHAUSTED 4      /* a quorum came too late: validity used up, rolled back */
#define PROBE_SHORT_EXTENSION 5 /* an extension to a shorter TTL succeeded */
#define PROBE_OVERLAP 6        /* the second of two overlapping extensions succeeded */
#define PROBE_FENCE_HANDOVER 7 /* a fenced holder got a fence above 1 */
#define PROBE_LATE_COMMIT 8    /* a late grant got its commit */
#define PROBE_STALE_REFUSED 9  /* the resource refused a write */
#define PROBE_REPLY_EXCLUDES 10 /* the guard excluded a grant at its reply */

#if N != 3 && N != 5
#error "N must be 3 or 5"
#endif
#if C != 2 && C != 3
#error "C must be 2 or 3"
#endif

#define QUORUM (N / 2 + 1)  /* quorum_of */
#define MAX_TTL TTL         /* client_options::max_ttl: no TTL above it */
#define QUARANTINE MAX_TTL  /* core::quarantine_for: restart_quarantine < 0 -> max_ttl */

/* ================================================================== state */
byte now; /* the current tick */

/* ---- the nodes. The lock key: kown = the token it holds (0: absent), kexp = the
 * tick at which the node's clock ends its TTL. The fence counter <key>:fence. The
 * restart guard's view of the node: rq = it restarted less than the quarantine ago,
 * at tick rtime (see restart). */
byte kown[N];
byte kexp[N];
byte cnt[N];
bit rq[N];
byte rtime[N];

/* ---- the network: at most one request in flight per (client, node), index
 * k = c * N + i: what it is, its token, its argument (a TTL or a fence), and the
 * round (tag 1 or 2) that counts its reply; 0 = nobody waits for it. */
#define OP_NONE 0
#define OP_ACQ 1    /* SET key token NX PX ttl (acquire_set / kAcquire); with FENCE,
                       kAcquireFenced: also GET <key>:fence */
#define OP_ACQDEL 2 /* an acquire with its rollback's delete queued behind it */
#define OP_DEL 3    /* kRelease: DEL if the key holds the token (release, rollback) */
#define OP_EXT 4    /* kExtend: PEXPIRE if the key holds the token */
#define OP_COMMIT 5 /* kFenceCommit: counter = max(counter, F) if the key holds the token */
byte op[C * N];
byte otk[C * N];
byte oarg[C * N];
byte otag[C * N];
byte delays;   /* requests delayed so far, <= DELAYS */
byte losses;   /* messages lost so far, <= LOSSES */
byte restarts; /* node restarts so far, <= RESTARTS */

/* ---- the rounds a client waits for (round::votes): yes votes of tag 1 (acquire,
 * commit, extension) and tag 2 (a second, overlapping extension); the nodes that
 * granted the acquire; the highest counter they returned. */
byte yes1[C];
byte yes2[C];
byte granted[C];
byte fmax[C];

/* ---- the lock handle (struct held): held, valid_until, token, fence. */
bit held[C];
byte vu[C];
byte ctok[C];
byte cfence[C];

/* ---- the fenced resource (fenced_write_script): the highest token it has seen.
 * Ghosts for the properties: done_count = fenced acquisitions completed so far,
 * maxfence = the highest fence one of them got, res_order = the place (in
 * completion order) of the acquisition whose write the resource accepted last. A
 * holder writes with its fence right after it acquired, or later (after a pause,
 * possibly past its validity): at most STALE_WRITES such late writes per run. The
 * resource's state depends only on the order of the writes, so a late write is
 * placed right after another holder's write (succeed), or never happens. */
byte res_hi;
byte res_order;
byte done_count;
byte maxfence;
byte late_writes;
byte wfence[C];
byte worder[C];
bit wpending[C];

#if PROBE
byte prev_holder; /* 1 + the client that held the lock last */
byte wiped;       /* nodes that came back empty from a restart (a bit each) */
#endif

/* Scratch. Every use lies within one atomic step, so `hidden` keeps them out of the
 * state vector. */
#ifndef SCRATCH
#define SCRATCH hidden byte /* -DSCRATCH=byte for pan -DBFS, which refuses hidden */
#endif
SCRATCH x_o, x_t, x_a, x_r, x_g, x_v, x_j, x_n, holders, hi, hk, nv, xttl;

#define KEY(c, i) ((c) * N + (i))
#define BIT(i) (1 << (i))

/* connection::acquire_exclusion: the node restarted (a new run_id) less than the
 * quarantine ago. */
#if GUARD
#define EXCLUDED(i) (rq[i] && now - rtime[i] < QUARANTINE)
#else
#define EXCLUDED(i) false
#endif
/* round::on_reply judges a grant again only when its reply carried a TIME sample. */
/* The library re-judges every acquire grant at its reply (round::on_reply), sampled
 * or not, since finding (f) was fixed; TIME_SAMPLE no longer matters here. */
#if GUARD
#define EXCLUDED_AT_REPLY(i) EXCLUDED(i)
#else
#define EXCLUDED_AT_REPLY(i) false
#endif

/* ================================================================== node steps */

/* Node i executes client c's request in flight (deterministic: a Lua script is
 * atomic on its node). A TTL it sets ends at kexp on the client's time scale; the
 * node's clock may end it a little earlier or later (tick). The reply counts for the
 * round that waits for it, if that round is still open. (A lost reply is a delayed
 * request executed right after its round was decided.) */
inline exec(c, i, k) {
  x_o = op[k]; x_t = otk[k]; x_a = oarg[k]; x_r = otag[k];
  op[k] = OP_NONE; otk[k] = 0; oarg[k] = 0; otag[k] = 0;
  x_g = 0; x_v = 0;
  if
  :: x_o == OP_ACQ || x_o == OP_ACQDEL ->
       if
       :: kown[i] == 0 ->
            kown[i] = x_t; kexp[i] = now + x_a; x_g = 1;
#if FENCE && NAIVE_FENCE == 1
            cnt[i]++;
#endif
            x_v = cnt[i];
            printf("t=%d n%d: SET NX of c%d granted, token %d, expires at %d, counter %d\n", now, i, c, x_t,
                   kexp[i], x_v)
       :: else -> printf("t=%d n%d: SET NX of c%d refused (token %d holds the key)\n", now, i, c, kown[i])
       fi;
       if
       :: x_o == OP_ACQDEL && x_g ->
            /* the rollback's delete was queued right behind it */
            kown[i] = 0; kexp[i] = 0;
            printf("t=%d n%d: rollback delete of token %d\n", now, i, x_t)
       :: x_o == OP_ACQ && x_r == 1 && x_g && EXCLUDED_AT_REPLY(i) ->
            /* a grant the guard excludes after the fact: no vote (rolled back on failure) */
            printf("t=%d c%d: grant of n%d excluded (restart guard)\n", now, c, i);
#if PROBE == PROBE_REPLY_EXCLUDES
            assert(false);
#endif
            skip
       :: x_o == OP_ACQ && x_r == 1 && x_g && !EXCLUDED_AT_REPLY(i) ->
#if PROBE == PROBE_RESTARTED_VOTE
            assert(!(wiped & BIT(i)));
#endif
            yes1[c]++;
            granted[c] = granted[c] | BIT(i);
            if
            :: x_v > fmax[c] -> fmax[c] = x_v
            :: else -> skip
            fi
#if FENCE && NAIVE_FENCE == 0
       :: x_o == OP_ACQ && x_r == 0 && x_g && held[c] && ctok[c] == x_t ->
            /* a grant after the fenced success gets the commit too (acquire_op::on_late) */
            op[k] = OP_COMMIT; otk[k] = x_t; oarg[k] = cfence[c];
            printf("t=%d c%d: late grant of n%d, commit sent\n", now, c, i)
#endif
       :: else -> skip
       fi
  :: x_o == OP_DEL ->
       if
       :: kown[i] == x_t -> kown[i] = 0; kexp[i] = 0; printf("t=%d n%d: delete of token %d\n", now, i, x_t)
       :: else -> skip
       fi
  :: x_o == OP_EXT ->
       if
       :: kown[i] == x_t ->
            kexp[i] = now + x_a; x_g = 1;
            printf("t=%d n%d: PEXPIRE %d of c%d done, expires at %d\n", now, i, x_a, c, kexp[i])
       :: else -> printf("t=%d n%d: PEXPIRE of c%d refused, not owner\n", now, i, c)
       fi
  :: x_o == OP_COMMIT ->
       if
       :: kown[i] == x_t ->
            if
            :: cnt[i] < x_a -> cnt[i] = x_a
            :: else -> skip
            fi;
            x_g = 1;
#if PROBE == PROBE_LATE_COMMIT
            assert(x_r != 0);
#endif
            printf("t=%d n%d: commit of fence %d by c%d done, counter %d\n", now, i, x_a, c, cnt[i])
       :: else -> printf("t=%d n%d: commit of fence %d by c%d refused, not owner\n", now, i, x_a, c)
       fi
  fi;
  if
  :: (x_o == OP_EXT || x_o == OP_COMMIT) && x_g && x_r == 1 -> yes1[c]++
  :: (x_o == OP_EXT || x_o == OP_COMMIT) && x_g && x_r == 2 -> yes2[c]++
  :: else -> skip
  fi
}

#define CLEAR_SLOT(k) op[k] = OP_NONE; otk[k] = 0; oarg[k] = 0; otag[k] = 0

/* Client c sends a request to node i. Its connection is ordered: a request still in
 * flight on it executes first, or is lost with the connection. The new request is
 * executed at once, or is one of at most DELAYS delayed requests (env executes it
 * at any later moment) or of at most LOSSES lost messages. Deletes always execute
 * at once: removing a key that no holder relies on as early as possible is the
 * harshest timing for everyone else. */
inline sendop(c, i, k, o, t, a, r) {
  if
  :: op[k] != OP_NONE && losses < LOSSES ->
       losses++;
       printf("t=%d request of c%d to n%d lost\n", now, c, i);
       CLEAR_SLOT(k)
  :: op[k] != OP_NONE -> d_step { exec(c, i, k); skip }
  :: else -> skip
  fi;
  op[k] = o; otk[k] = t; oarg[k] = a; otag[k] = r;
  if
  :: d_step { exec(c, i, k); skip }
  :: o != OP_DEL && delays < DELAYS -> delays++; printf("t=%d request of c%d to n%d delayed\n", now, c, i)
  :: o != OP_DEL && losses < LOSSES ->
       losses++;
       printf("t=%d request of c%d to n%d lost\n", now, c, i);
       CLEAR_SLOT(k)
  fi
}

/* ================================================================== client steps */

/* A round is decided: replies that come later count for nothing. */
inline close_round(c, tag) {
  for (x_j : 0 .. N - 1) {
    if
    :: otag[KEY(c, x_j)] == tag -> otag[KEY(c, x_j)] = 0
    :: else -> skip
    fi
  }
}

/* x_n = requests of client c's round `tag` still in flight. */
inline count_pending(c, tag) {
  x_n = 0;
  for (x_j : 0 .. N - 1) {
    if
    :: op[KEY(c, x_j)] != OP_NONE && otag[KEY(c, x_j)] == tag -> x_n++
    :: else -> skip
    fi
  }
}

/* MUTUAL EXCLUSION: at no tick do two clients hold the lock with validity left.
 * Checked whenever a validity is set or raised, the only steps that can make it
 * false (time only ends validity). */
inline check_mutex() {
  holders = 0;
  for (x_j : 0 .. C - 1) {
    if
    :: held[x_j] && now < vu[x_j] -> holders++
    :: else -> skip
    fi
  };
  if
  :: holders > 1 ->
       printf("t=%d VIOLATION: two clients hold the lock:", now);
       for (x_j : 0 .. C - 1) {
         if
         :: held[x_j] && now < vu[x_j] -> printf(" c%d (valid until %d)", x_j, vu[x_j])
         :: else -> skip
         fi
       };
       printf("\n")
  :: else -> skip
  fi;
  assert(holders <= 1)
}

/* Client c's write to the fenced resource with the fence of its last acquisition.
 * RESOURCE ORDER: the resource never accepts a write of an older fenced
 * acquisition after one of a newer. */
inline resource_write(c) {
  wpending[c] = 0;
  if
  :: wfence[c] >= res_hi ->
       printf("t=%d resource accepts c%d's write with fence %d (acquisition %d)\n", now, c, wfence[c],
              worder[c]);
       if
       :: worder[c] < res_order ->
            printf("t=%d VIOLATION: the write of acquisition %d accepted after one of acquisition %d\n", now,
                   worder[c], res_order)
       :: else -> skip
       fi;
       assert(worder[c] >= res_order);
       res_hi = wfence[c]; res_order = worder[c]
  :: else ->
       printf("t=%d resource refuses c%d's write: fence %d < %d\n", now, c, wfence[c], res_hi);
#if PROBE == PROBE_STALE_REFUSED
       assert(false);
#endif
       skip
  fi;
  wfence[c] = 0; worder[c] = 0
}

/* The phases of a client (one lock handle at a time). */
#define IDLE 0
#define ACQ_WAIT 1    /* acquire sent, a request still in flight */
#define COMMIT_WAIT 2 /* fence commit sent, a request still in flight */
#define HELD 3        /* the handle exists (its validity may have run out) */

/* acquire_op::succeed: valid_until = start + ttl - drift. */
inline succeed() {
  held[c] = 1;
  vu[c] = start + TTL - DRIFT;
  cfence[c] = fence;
  phase = HELD;
  printf("t=%d c%d: HOLDS the lock with token %d, valid until %d, fence %d\n", now, c, ctok[c], vu[c], fence);
  check_mutex();
#if PROBE == PROBE_HANDOVER
  assert(prev_holder == 0 || prev_holder == c + 1);
#elif PROBE == PROBE_FENCE_HANDOVER
  assert(fence < 2);
#endif
#if PROBE
  prev_holder = c + 1;
#endif
#if FENCE
  /* FENCE MONOTONICITY: each fenced acquisition's token is above every token of
   * the fenced acquisitions completed before it. */
#if CHECK_FENCE_ORDER
  if
  :: fence <= maxfence -> printf("t=%d VIOLATION: fence %d issued after fence %d\n", now, fence, maxfence)
  :: else -> skip
  fi;
  assert(fence > maxfence);
#else
  if
  :: fence <= maxfence -> printf("t=%d (fence %d is not above fence %d: not asserted in this run)\n", now, fence, maxfence)
  :: else -> skip
  fi;
#endif
  if
  :: fence > maxfence -> maxfence = fence
  :: else -> skip
  fi;
  done_count++;
  wfence[c] = fence; worder[c] = done_count;
  if
  :: d_step { resource_write(c) };
     /* another holder's late write may come right after (only the order of the
      * writes matters to the resource) */
     for (x_j : 0 .. C - 1) {
       if
       :: wpending[x_j] ->
            if
            :: d_step { resource_write(x_j) }
            :: skip
            fi
       :: else -> skip
       fi
     }
  :: late_writes < STALE_WRITES -> late_writes++; wpending[c] = 1
  fi;
#endif
  start = 0; sent = 0; fence = 0;
  yes1[c] = 0; granted[c] = 0; fmax[c] = 0
}

/* fail_attempt + rollback: the ownership-checked delete to every node asked (an
 * acquire still in flight gets it queued behind it); then a later attempt. */
inline fail_attempt() {
  printf("t=%d c%d: attempt with token %d failed, rollback\n", now, c, ctok[c]);
  for (hi : 0 .. N - 1) {
    hk = KEY(c, hi);
    if
    :: (sent & BIT(hi)) && op[hk] == OP_ACQ && otk[hk] == ctok[c] -> op[hk] = OP_ACQDEL; otag[hk] = 0
    :: (sent & BIT(hi)) && !(op[hk] == OP_ACQ && otk[hk] == ctok[c]) -> sendop(c, hi, hk, OP_DEL, ctok[c], 0, 0)
    :: else -> skip
    fi
  };
  phase = IDLE; start = 0; sent = 0; fence = 0; ctok[c] = 0;
  yes1[c] = 0; granted[c] = 0; fmax[c] = 0
}

/* commit_fence's decision: a quorum committed and validity is left. */
inline commit_decided() {
  skip; d_step { close_round(c, 1); skip };
  if
  :: yes1[c] >= QUORUM && now - start < TTL - DRIFT -> succeed()
  :: else -> fail_attempt()
  fi
}

/* acquire_op::on_acquired: a quorum of grants and validity left (ttl - elapsed -
 * drift > 0, elapsed counted from before the first request): fenced, the commit
 * round (commit_fence: F = 1 + max of the counters returned, sent to every node that
 * granted); otherwise success. Else fail_attempt. */
inline acquire_decided() {
  skip; d_step { close_round(c, 1); skip };
#if PROBE == PROBE_EXHAUSTED
  assert(!(yes1[c] >= QUORUM && now - start >= TTL - DRIFT));
#endif
  if
  :: yes1[c] >= QUORUM && now - start < TTL - DRIFT ->
#if FENCE && NAIVE_FENCE == 0
       fence = fmax[c] + 1;
       yes1[c] = 0;
       printf("t=%d c%d: quorum, fence %d, commit\n", now, c, fence);
       for (hi : 0 .. N - 1) {
         if
         :: granted[c] & BIT(hi) -> sendop(c, hi, KEY(c, hi), OP_COMMIT, ctok[c], fence, 1)
         :: else -> skip
         fi
       };
       phase = COMMIT_WAIT;
       skip; d_step { count_pending(c, 1); skip };
       if
       :: x_n == 0 -> commit_decided()
       :: else -> skip
       fi
#elif FENCE && NAIVE_FENCE == 1
       fence = fmax[c]; /* the max of the per-node INCRs */
       succeed()
#elif FENCE && NAIVE_FENCE == 2
       fence = fmax[c] + 1; /* no commit phase */
       succeed()
#else
       fence = 0;
       succeed()
#endif
  :: else -> fail_attempt()
  fi
}

/* extend_round's decision + extension_succeeded: a quorum extended and validity is
 * left: the new valid_until = start + ttl - drift, stored if this is the latest
 * extension sent or if it is lower. A failure keeps what begin_extension set. */
inline extension_decided(e, es, et, eq, yes, tag) {
  e = 0;
  skip; d_step { close_round(c, tag); skip };
  if
  :: yes >= QUORUM && now - es < et - DRIFT ->
       nv = es + et - DRIFT;
#if LATEST_ONLY
       if
       :: eq == ext || nv < vu[c] -> vu[c] = nv
       :: else -> skip
       fi;
#else
       vu[c] = nv;
#endif
       printf("t=%d c%d: extension %d succeeded, valid until %d\n", now, c, eq, vu[c]);
#if PROBE == PROBE_SHORT_EXTENSION
       assert(et != SHORT);
#elif PROBE == PROBE_OVERLAP
       assert(tag != 2);
#endif
       skip; d_step { check_mutex(); skip }
  :: else -> printf("t=%d c%d: extension %d failed, valid until %d\n", now, c, eq, vu[c])
  fi;
  es = 0; et = 0; eq = 0; yes = 0
}

/* ================================================================== a client */
proctype client(byte c) {
  byte phase, att, start, sent, fence, ext;
  bit e1, e2;
  byte e1start, e1ttl, e1seq, e2start, e2ttl, e2seq;

  do
  /* ---- acquire_op::start_attempt: a fresh token, start = now, the acquire to every
   * node the guard does not exclude. Decided in the same step unless a request is
   * delayed (a later decision would only shorten the validity it believes in). */
  :: atomic {
       phase == IDLE && att < ACQS ->
       att++;
       ctok[c] = c + 1 + C * (att - 1);
       cfence[c] = 0;
       start = now; sent = 0;
       yes1[c] = 0; granted[c] = 0; fmax[c] = 0;
       printf("t=%d c%d: acquire with token %d\n", now, c, ctok[c]);
       for (hi : 0 .. N - 1) {
         hk = KEY(c, hi);
         /* connection::acquire_exclusion. A client whose connection was down at the
          * restart has not seen it yet: its acquire passes this check, waits for the
          * reconnect and is written after the handshake (see restart). (The model
          * offers that case on every acquire within the quarantine, also to a client
          * that has reconnected since: more runs than exist, none fewer.) */
         if
         :: EXCLUDED(hi) ->
              if
              :: printf("t=%d c%d: n%d excluded (restart guard)\n", now, c, hi);
#if PROBE == PROBE_GUARD_EXCLUDES
                 assert(false);
#endif
                 skip
              :: printf("t=%d c%d: its connection to n%d was down at the restart: the acquire waits for the reconnect, after the guard's check\n",
                        now, c, hi);
                 sendop(c, hi, hk, OP_ACQ, ctok[c], TTL, 1); sent = sent | BIT(hi)
              fi
         :: else ->
              sendop(c, hi, hk, OP_ACQ, ctok[c], TTL, 1); sent = sent | BIT(hi)
         fi
       };
       phase = ACQ_WAIT;
       skip; d_step { count_pending(c, 1); skip };
       if
       :: x_n == 0 -> acquire_decided()
       :: else -> skip
       fi
     }
  /* ---- with a request in flight: the decision at any later moment (a timeout, or
   * the last reply) */
  :: atomic { phase == ACQ_WAIT -> acquire_decided() }
  :: atomic { phase == COMMIT_WAIT -> commit_decided() }
  /* ---- holding: an extension (the watchdog or extend()) to the same or a shorter
   * TTL, while validity is left (extend_round refuses after it) */
  :: atomic {
       phase == HELD && now < vu[c] && ext < EXTS && !(e1 && e2) && (OVERLAP || !(e1 || e2)) ->
       if
       :: xttl = TTL
       :: xttl = SHORT
       fi;
#if LOWER_ON_EXTEND
       /* begin_extension */
       nv = now + xttl - DRIFT;
       if
       :: nv < vu[c] -> vu[c] = nv
       :: else -> skip
       fi;
#endif
       ext++;
       printf("t=%d c%d: extension %d to ttl %d, valid until %d\n", now, c, ext, xttl, vu[c]);
       if
       :: !e1 ->
            e1 = 1; e1start = now; e1ttl = xttl; e1seq = ext; yes1[c] = 0;
            for (hi : 0 .. N - 1) { sendop(c, hi, KEY(c, hi), OP_EXT, ctok[c], xttl, 1) };
            skip; d_step { count_pending(c, 1); skip };
            if
            :: x_n == 0 -> extension_decided(e1, e1start, e1ttl, e1seq, yes1[c], 1)
            :: else -> skip
            fi
       :: else ->
            e2 = 1; e2start = now; e2ttl = xttl; e2seq = ext; yes2[c] = 0;
            for (hi : 0 .. N - 1) { sendop(c, hi, KEY(c, hi), OP_EXT, ctok[c], xttl, 2) };
            skip; d_step { count_pending(c, 2); skip };
            if
            :: x_n == 0 -> extension_decided(e2, e2start, e2ttl, e2seq, yes2[c], 2)
            :: else -> skip
            fi
       fi
     }
  :: atomic { phase == HELD && e1 -> extension_decided(e1, e1start, e1ttl, e1seq, yes1[c], 1) }
  :: atomic { phase == HELD && e2 -> extension_decided(e2, e2start, e2ttl, e2seq, yes2[c], 2) }
  /* ---- release_held: the handle is finished at once (also after its validity ran
   * out); the delete goes to every node */
  :: atomic {
       phase == HELD ->
       held[c] = 0; vu[c] = 0; phase = IDLE; cfence[c] = 0;
       e1 = 0; e2 = 0; e1start = 0; e1ttl = 0; e1seq = 0; e2start = 0; e2ttl = 0; e2seq = 0; ext = 0;
       skip; d_step { close_round(c, 1); close_round(c, 2) };
       printf("t=%d c%d: release of token %d\n", now, c, ctok[c]);
       for (hi : 0 .. N - 1) { sendop(c, hi, KEY(c, hi), OP_DEL, ctok[c], 0, 0) };
       ctok[c] = 0
     }
  :: phase == IDLE && att >= ACQS -> break
  od
}

/* ================================================================== the environment */

/* A tick. A key whose TTL ends at kexp (client time) is gone at some tick in
 * [kexp - EARLY, kexp + LATE]: the node's clock may run ahead or behind within that
 * bound, decided key by key. A quarantine that is over is forgotten (its start no
 * longer matters). */
inline tick() {
  now++;
  for (x_j : 0 .. N - 1) {
    if
    :: kown[x_j] != 0 && now >= kexp[x_j] + LATE ->
         printf("t=%d n%d: key of token %d expires\n", now, x_j, kown[x_j]);
         kown[x_j] = 0; kexp[x_j] = 0
    :: kown[x_j] != 0 && now + EARLY >= kexp[x_j] && now < kexp[x_j] + LATE ->
         if
         :: printf("t=%d n%d: key of token %d expires, %d tick(s) early by the node's clock\n", now, x_j,
                   kown[x_j], kexp[x_j] - now);
            kown[x_j] = 0; kexp[x_j] = 0
         :: skip
         fi
    :: else -> skip
    fi;
    if
    :: rq[x_j] && now - rtime[x_j] >= QUARANTINE -> rq[x_j] = 0; rtime[x_j] = 0
    :: else -> skip
    fi
  }
}

/* Node i crashes and restarts: a new run_id; with persistence (appendonly,
 * appendfsync always) keys and counters survive, without it they are gone. The
 * restart is instantaneous. Requests written before it and not executed die with
 * their connections. Each client reconnects at once and sees the new run_id in the
 * handshake (INFO: connection::on_info): its quarantine starts now (restarted_at_).
 * A client whose connection was down at the restart sees it later, in the handshake
 * of its reconnect: its quarantine starts later than modelled (the safe direction),
 * but an acquire that it started before that reconnect was checked by the guard
 * with the old knowledge and is written after the handshake: the send step offers
 * that case. */
inline restart(i) {
  restarts++;
  for (x_j : 0 .. C - 1) {
    if
    :: op[KEY(x_j, i)] != OP_NONE ->
         printf("t=%d request of c%d to n%d lost in the crash\n", now, x_j, i);
         CLEAR_SLOT(KEY(x_j, i))
    :: else -> skip
    fi
  };
#if GUARD
  rq[i] = 1;
  rtime[i] = now;
#endif
  if
  :: RESTART_DATA & 1 -> printf("t=%d n%d restarts, data kept\n", now, i)
  :: RESTART_DATA & 2 ->
       printf("t=%d n%d restarts EMPTY (no persistence)\n", now, i);
#if PROBE
       wiped = wiped | BIT(i);
#endif
       kown[i] = 0; kexp[i] = 0; cnt[i] = 0
  fi
}

#define DLV(c, i) :: atomic { op[KEY(c, i)] != OP_NONE -> d_step { exec(c, i, KEY(c, i)); skip } }
#if N == 5
#define NODES_3_4(m, c) m(c, 3) m(c, 4)
#else
#define NODES_3_4(m, c)
#endif
#define FOR_NODES(m, c) m(c, 0) m(c, 1) m(c, 2) NODES_3_4(m, c)
/* Nodes are interchangeable (every step treats them alike, the properties do not
 * name them): a run whose first restart hits node j is, with j and 0 swapped
 * throughout, a run whose first restart hits node 0. So the first restart is node
 * 0's; later ones may hit any node. */
#define RST(c, i) :: atomic { restarts < RESTARTS && (i == 0 || restarts > 0) -> restart(i) }

/* Time, delayed requests and restarts, in any
 * order with the clients' steps. */
proctype env() {
end:
  do
  :: atomic { now < MAXT -> tick() }
  FOR_NODES(DLV, 0)
  FOR_NODES(DLV, 1)
#if C == 3
  FOR_NODES(DLV, 2)
#endif
  FOR_NODES(RST, 0)
  od
}

init {
  atomic {
    run env();
    run client(0);
    run client(1);
#if C == 3
    run client(2);
#endif
  }
}
