#!/usr/bin/env bash
# Runs every SPIN configuration of the protocol model (tests/model/redlock.pml) that
# CI checks; docs/verification.md explains the model, the bounds and the traces.
#
#   verify runs     must finish their search with no error. "exact" stores every
#                   state (-DCOLLAPSE); "bitstate" is SPIN's supertrace (-DBITSTATE,
#                   -w30 -k3: 128 MiB of bits, 3 hash functions), which may miss a
#                   tiny fraction of states: the line shows the hash factor (above
#                   ~20 the expected loss is well under 0.5 %).
#   violation runs  the negative controls: one switch of a verify configuration
#                   flipped (an assumption removed, or the library's rule replaced by
#                   the naive one). Searched breadth-first, so the counter-example is
#                   a shortest one; the run must stop at the expected assertion. Each
#                   is paired with a "*.ok" run of exactly the same flags with the
#                   switch restored, which must verify.
#   probe runs      guard the verify runs against vacuity: "name+probe" is the verify
#                   configuration `name` with -DPROBE=k, one assertion claiming that
#                   a meaningful event never happens (a hand-over between clients, a
#                   vote from a node that came back empty, a successful extension to
#                   a shorter TTL, a late commit, ...; tests/model/redlock.pml lists
#                   them). The checker must find the event.
# Any other outcome (an error in a verify run, no or another violation in a
# negative control, an unreached probe, a search cut short by memory or depth)
# fails the script.
#
# One summary line per run: result, name, states stored, seconds (spin + cc + pan),
# outcome. The readable trace of each counter-example follows its line.
#
# Environment:
#   SPIN                   spin executable (default: spin on PATH)
#   REDLOCK_MODEL_CC       C compiler for pan.c (default: cc)
#   REDLOCK_MODEL_JOBS     runs in parallel (default: 2)
#   REDLOCK_MODEL_ONLY     a regular expression: run only the configurations it matches
#   REDLOCK_MODEL_TRACES   a directory: write each counter-example's trace there
#   REDLOCK_MODEL_KEEP=1   keep the work directory (pan.c, pan, trails, logs)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
model=$root/tests/model/redlock.pml
spin=${SPIN:-spin}
cc=${REDLOCK_MODEL_CC:-cc}
jobs=${REDLOCK_MODEL_JOBS:-2}
only=${REDLOCK_MODEL_ONLY:-}
traces=${REDLOCK_MODEL_TRACES:-}

command -v "$spin" >/dev/null || { echo "check-model: spin not found (tools/deps.sh installs it)"; exit 2; }
command -v "$cc" >/dev/null || { echo "check-model: no C compiler ($cc)"; exit 2; }
[ -f "$model" ] || { echo "check-model: $model missing"; exit 2; }

# name | expect | mode | -D flags | what it checks | probes it must reach
#   expect: verify, or the assertion a negative control must violate:
#           mutex (holders<=1), fence (fence>maxfence), resource (worder[..]>=res_order)
#   mode:   exact | small (exact, pan.c built with -O0: for searches shorter than
#           an optimised build) | bitstate | bfs (exact, breadth-first: shortest
#           counter-example)
# Bounds shared by every run unless overridden: TTL 4, SHORT 2, DRIFT 1, EARLY 1,
# LATE 0, MAXT 5 (ticks 0..5).
configs=(
  # ---- positive checks: the library's rules, under the stated assumptions
  "mutex-3x2|verify|bitstate|-DN=3 -DC=2 -DACQS=2 -DEXTS=1 -DDELAYS=1 -DLOSSES=1 -DRESTARTS=1 -DRESTART_DATA=3|mutual exclusion; restarts with or without data, restart guard on|handover restarted_vote guard_excludes reply_excludes exhausted short_extension"
  "persist-3x2|verify|exact|-DN=3 -DC=2 -DACQS=2 -DEXTS=1 -DDELAYS=1 -DLOSSES=1 -DRESTARTS=1 -DRESTART_DATA=1 -DGUARD=0|mutual exclusion; restarts keep their data, restart guard off|handover"
  "extend-3x2|verify|bitstate|-DN=3 -DC=2 -DACQS=1 -DEXTS=2 -DOVERLAP=1 -DDELAYS=1 -DLOSSES=1 -DRESTARTS=1 -DRESTART_DATA=2|mutual exclusion; two extensions (same or shorter TTL), overlapping|short_extension overlap"
  "fence-3x2|verify|bitstate|-DN=3 -DC=2 -DFENCE=1 -DSTALE_WRITES=0 -DACQS=2 -DEXTS=0 -DDELAYS=1 -DLOSSES=1 -DRESTARTS=1 -DRESTART_DATA=1|fence monotonicity + mutual exclusion; persistent restarts|fence_handover late_commit"
  "mutex-5x2|verify|bitstate|-DN=5 -DC=2 -DACQS=2 -DEXTS=1 -DDELAYS=1 -DLOSSES=0 -DRESTARTS=1 -DRESTART_DATA=3|mutual exclusion, five nodes|handover restarted_vote"
  "mutex-3x3|verify|bitstate|-DN=3 -DC=3 -DACQS=1 -DEXTS=1 -DDELAYS=1 -DLOSSES=0 -DRESTARTS=1 -DRESTART_DATA=3|mutual exclusion, three clients|handover restarted_vote"
  "mutex-5x3|verify|bitstate|-DN=5 -DC=3 -DACQS=1 -DEXTS=0 -DDELAYS=1 -DLOSSES=0 -DRESTARTS=1 -DRESTART_DATA=3|mutual exclusion, five nodes and three clients|handover"
  "fence-3x3|verify|bitstate|-DN=3 -DC=3 -DFENCE=1 -DSTALE_WRITES=0 -DACQS=1 -DEXTS=0 -DDELAYS=1 -DLOSSES=0 -DRESTARTS=1 -DRESTART_DATA=1|fence monotonicity, three clients|fence_handover"
  # ---- negative controls (and their pairs)
  "a.no-guard|mutex|bfs|-DGUARD=0 -DRESTART_DATA=2 -DACQS=1 -DEXTS=0 -DDELAYS=0 -DLOSSES=1 -DRESTARTS=1|(a) restart without persistence, restart guard off"
  "a.ok|verify|small|-DGUARD=1 -DRESTART_DATA=2 -DACQS=1 -DEXTS=0 -DDELAYS=0 -DLOSSES=1 -DRESTARTS=1|(a) paired: the same with the guard on"
  "b.incr|fence|bfs|-DFENCE=1 -DNAIVE_FENCE=1 -DACQS=2 -DEXTS=0 -DDELAYS=0 -DLOSSES=3 -DRESTARTS=0|(b) naive fencing: the max of per-node INCRs"
  "b.incr.ok|verify|small|-DFENCE=1 -DNAIVE_FENCE=0 -DACQS=2 -DEXTS=0 -DDELAYS=0 -DLOSSES=3 -DRESTARTS=0|(b) paired: the same with the commit phase"
  "b.nocommit|fence|bfs|-DFENCE=1 -DNAIVE_FENCE=2 -DACQS=1 -DEXTS=0 -DDELAYS=0 -DLOSSES=0 -DRESTARTS=0|(b) naive fencing: 1 + max of the counters, no commit phase"
  "b.nocommit.ok|verify|small|-DFENCE=1 -DNAIVE_FENCE=0 -DACQS=1 -DEXTS=0 -DDELAYS=0 -DLOSSES=0 -DRESTARTS=0|(b) paired: the same with the commit phase"
  "b.resource|resource|bfs|-DFENCE=1 -DNAIVE_FENCE=1 -DCHECK_FENCE_ORDER=0 -DSTALE_WRITES=1 -DACQS=2 -DEXTS=0 -DDELAYS=0 -DLOSSES=3 -DRESTARTS=0|(b) at the resource: a stale write accepted"
  "b.resource.ok|verify|small|-DFENCE=1 -DNAIVE_FENCE=0 -DCHECK_FENCE_ORDER=0 -DSTALE_WRITES=1 -DACQS=2 -DEXTS=0 -DDELAYS=0 -DLOSSES=3 -DRESTARTS=0|(b) paired: the resource with the commit phase|stale_refused"
  "c.no-lowering|mutex|bfs|-DLOWER_ON_EXTEND=0 -DACQS=1 -DEXTS=1 -DDELAYS=1 -DLOSSES=0 -DRESTARTS=0|(c) extend to a shorter TTL without lowering validity"
  "c.ok|verify|small|-DLOWER_ON_EXTEND=1 -DACQS=1 -DEXTS=1 -DDELAYS=1 -DLOSSES=0 -DRESTARTS=0|(c) paired: validity lowered before the send"
  "c.any-raises|mutex|bfs|-DLATEST_ONLY=0 -DOVERLAP=1 -DACQS=1 -DEXTS=2 -DDELAYS=1 -DLOSSES=0 -DRESTARTS=0|(c) an older extension's success raises validity"
  "c.any-raises.ok|verify|small|-DLATEST_ONLY=1 -DOVERLAP=1 -DACQS=1 -DEXTS=2 -DDELAYS=1 -DLOSSES=0 -DRESTARTS=0|(c) paired: only the latest extension raises it"
  "d.drift|mutex|bfs|-DEARLY=2 -DACQS=1 -DEXTS=0 -DDELAYS=0 -DLOSSES=0 -DRESTARTS=0|(d) a node clock ahead by more than the drift allowance"
  "d.ok|verify|small|-DEARLY=1 -DACQS=1 -DEXTS=0 -DDELAYS=0 -DLOSSES=0 -DRESTARTS=0|(d) paired: within the allowance"
  "e.fence-no-data|fence|bfs|-DFENCE=1 -DRESTART_DATA=2 -DACQS=1 -DEXTS=0 -DDELAYS=0 -DLOSSES=2 -DRESTARTS=1|(e) fencing across a restart without persistence (guard on)"
  "e.ok|verify|small|-DFENCE=1 -DRESTART_DATA=1 -DACQS=1 -DEXTS=0 -DDELAYS=0 -DLOSSES=2 -DRESTARTS=1|(e) paired: the restart keeps its data"
  "f.no-time-sample|verify|small|-DTIME_SAMPLE=0 -DRESTART_DATA=2 -DACQS=1 -DEXTS=0 -DDELAYS=0 -DLOSSES=1 -DRESTARTS=1|(f) fixed: restart guard on, no TIME sample behind the acquire (was a counter-example)"
  "f.ok|verify|small|-DTIME_SAMPLE=1 -DRESTART_DATA=2 -DACQS=1 -DEXTS=0 -DDELAYS=0 -DLOSSES=1 -DRESTARTS=1|(f) paired: with the TIME sample (the default)"
)

work=$(mktemp -d "${TMPDIR:-/tmp}/redlock-model.XXXXXX")
if [ "${REDLOCK_MODEL_KEEP:-0}" = 1 ]; then
  echo "check-model: work directory $work (kept)"
else
  trap 'rm -rf "$work"' EXIT
fi
[ -z "$traces" ] || mkdir -p "$traces"

probe_number() { # probe name -> its PROBE value in the model
  case "$1" in
    handover) echo 1 ;; restarted_vote) echo 2 ;; guard_excludes) echo 3 ;; exhausted) echo 4 ;;
    short_extension) echo 5 ;; overlap) echo 6 ;; fence_handover) echo 7 ;; late_commit) echo 8 ;;
    stale_refused) echo 9 ;; reply_excludes) echo 10 ;;
    *) echo "check-model: unknown probe $1" >&2; exit 2 ;;
  esac
}

assertion_of() { # expect -> the text pan prints for the assertion
  case "$1" in
    mutex) echo "(holders<=1)" ;;
    fence) echo "(fence>maxfence)" ;;
    resource) echo ">=res_order)" ;;
  esac
}

run_one() { # index: runs configuration $index, writes $work/$index.line (and .trace)
  local idx=$1 name expect mode flags what probes dir cflags panflags t0 t1 out states rc=0 result detail hf
  IFS='|' read -r name expect mode flags what probes <<<"${configs[$idx]}"
  dir=$work/$name
  mkdir -p "$dir"
  cp "$model" "$dir/redlock.pml"
  # -DNOREDUCE: every variable is global, so partial-order reduction finds nothing
  # to reduce and only costs time. -DSAFETY: assertions and end states, no cycles.
  cflags=(-DSAFETY -DNOREDUCE -DNOBOUNDCHECK)
  panflags=(-m20000)
  local spinflags
  read -r -a spinflags <<<"$flags"
  case "$mode" in
    exact) cflags=(-O2 "${cflags[@]}" -DCOLLAPSE -DMEMLIM=2048) ;;
    small) cflags=(-O0 "${cflags[@]}" -DCOLLAPSE -DMEMLIM=2048) ;;
    bitstate) cflags=(-O2 "${cflags[@]}" -DBITSTATE); panflags+=(-w30 -k3) ;;
    # BFS refuses `hidden` variables: the model's scratch variables become plain ones.
    bfs) cflags=(-O0 "${cflags[@]}" -DBFS -DCOLLAPSE -DMEMLIM=2048); spinflags+=(-DSCRATCH=byte) ;;
    # Depth-first: a reachable probe is found long before the space is exhausted.
    probe) cflags=(-O0 "${cflags[@]}" -DCOLLAPSE -DMEMLIM=2048) ;;
  esac
  t0=$(date +%s.%N)
  (cd "$dir" && "$spin" -a "${spinflags[@]}" redlock.pml >spin.log 2>&1 && "$cc" "${cflags[@]}" -o pan pan.c >cc.log 2>&1 &&
    timeout 900 ./pan "${panflags[@]}" >pan.log 2>&1) || rc=$?
  t1=$(date +%s.%N)
  out=$(cat "$dir/pan.log" 2>/dev/null || true)
  states=$(sed -nE 's/^ *([0-9.e+]+) states, stored.*/\1/p' <<<"$out" | head -n 1)
  [[ "$states" == *e+* ]] && states=$(awk -v s="$states" 'BEGIN { printf "%d", s }')
  hf=$(sed -nE 's/^hash factor: ([0-9.]+).*/\1/p' <<<"$out")
  local cut="" errors
  grep -qE "reached -DMEMLIM|out of memory|max search depth too small" <<<"$out" && cut="search cut short"
  errors=$(sed -nE 's/.*errors: ([0-9]+).*/\1/p' <<<"$out" | head -n 1)
  if [ ! -f "$dir/pan" ]; then
    result=FAIL
    detail="model did not build: $(tail -n 3 "$dir/spin.log" "$dir/cc.log" 2>/dev/null | tr '\n' ' ')"
  elif [ "$expect" = probe ]; then
    if grep -q "assertion violated" <<<"$out" && ! grep "assertion violated" <<<"$out" | grep -qE "holders|maxfence|res_order"; then
      result=PASS
      detail="reached"
    else
      result=FAIL
      detail="probe not reached: $(grep -m1 -E 'assertion violated|errors:' <<<"$out" || echo "pan exit $rc") ${cut}"
    fi
  elif [ "$expect" = verify ]; then
    if [ "$rc" -eq 0 ] && [ "${errors:-x}" = 0 ] && [ -z "$cut" ] && ! grep -q "Search not completed" <<<"$out"; then
      result=PASS
      detail="no errors, ${mode/small/exact}"
      [ "$mode" = bitstate ] && detail="$detail (hash factor $hf)"
    else
      result=FAIL
      detail="expected no error: $(grep -m1 -E "assertion violated|invalid end state|errors:" <<<"$out" || echo "pan exit $rc") ${cut}"
    fi
  else
    local want
    want=$(assertion_of "$expect")
    if grep -q "assertion violated" <<<"$out" && grep "assertion violated" <<<"$out" | grep -qF "$want"; then
      result=PASS
      detail="counter-example found ($expect: $(grep -m1 -oE 'assertion violated .*\) \(at depth' <<<"$out" | sed 's/ (at depth//'))"
      # The readable trace: the model's printf lines of the trail.
      (cd "$dir" && "$spin" -t -T "${spinflags[@]}" redlock.pml 2>&1 | grep -E '^t=' >trace.txt) || true
      cp "$dir/trace.txt" "$work/$idx.trace"
      [ -z "$traces" ] || cp "$dir/trace.txt" "$traces/$name.txt"
    else
      result=FAIL
      detail="expected a $expect violation: $(grep -m1 -E 'assertion violated|errors:' <<<"$out" || echo "pan exit $rc") ${cut}"
    fi
  fi
  printf '%-5s %-26s %10s states %6.1f s  %s\n' "$result" "$name" "${states:-?}" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$detail" >"$work/$idx.line"
  printf '      %s: %s\n' "$what" "$flags" >>"$work/$idx.line"
  cat "$work/$idx.line"
}

# Each verify configuration's probes become runs of their own.
for i in "${!configs[@]}"; do
  IFS='|' read -r name expect mode flags what probes <<<"${configs[$i]}"
  for p in $probes; do
    configs+=("$name+$p|probe|probe|$flags -DPROBE=$(probe_number "$p")|reachability probe '$p' of $name|")
  done
done

start=$(date +%s)
selected=()
for i in "${!configs[@]}"; do
  name=${configs[$i]%%|*}
  if [ -z "$only" ] || [[ "$name" =~ $only ]]; then selected+=("$i"); fi
done
[ ${#selected[@]} -gt 0 ] || { echo "check-model: no configuration matches '$only'"; exit 2; }
echo "check-model: ${#selected[@]} runs, $jobs at a time ($("$spin" -V | head -n 1))"

running=0
for i in "${selected[@]}"; do
  run_one "$i" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

echo
echo "== summary (in order)"
failed=0
for i in "${selected[@]}"; do
  if [ ! -f "$work/$i.line" ]; then
    echo "FAIL  ${configs[$i]%%|*}: no result"
    failed=$((failed + 1))
    continue
  fi
  head -n 1 "$work/$i.line"
  grep -q '^FAIL' "$work/$i.line" && failed=$((failed + 1))
  if [ -f "$work/$i.trace" ]; then sed 's/^/        | /' "$work/$i.trace"; fi
done
echo "check-model: ${#selected[@]} runs, $failed unexpected, $(($(date +%s) - start)) s"
[ "$failed" -eq 0 ]
