#!/usr/bin/env bash
# Checks that a shared redlock library exports its whole public API.
#   tools/check-exports.sh LIB.so OBJECTS_OR_ARCHIVES...
# The public API is every function and object the library's own code defines
# (strong global definitions in the objects: T, D, B, R in nm) in namespace
# redlock (or redlock::testing), outside redlock::detail and anonymous
# namespaces, whose first name there (the class, or the free function) the
# public headers (include/redlock/*.h) name: what they declare and lib/ defines
# out of line. (lib/'s internal types elsewhere in namespace redlock, such as
# the simulator's redlock::testing::sim_rng, are not named there.) Inline
# functions and templates (weak, W/V) are compiled into the user and need no
# export. Each such symbol must be in LIB.so's dynamic symbol table (nm -D
# --defined-only); one that is not was left without REDLOCK_EXPORT and a user
# of the shared library fails to link against it (README's report::message()
# did). Prints the public symbols it checked and every missing one; exit 1 if
# any is missing, or if it found no public symbol at all.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 LIB.so OBJECTS_OR_ARCHIVES..." >&2; exit 64; }
so=$1
shift
headers=$(cd "$(dirname "$0")/../include/redlock" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/redlock-exports.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Strong global definitions: "mangled<TAB>demangled".
nm --defined-only --extern-only "$@" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[TDBR]$/ { print $3 }' | sort -u >"$tmp/mangled"
c++filt <"$tmp/mangled" >"$tmp/demangled"
paste "$tmp/mangled" "$tmp/demangled" | awk -F'\t' '
  {
    d = $2
    sub(/^(vtable for |typeinfo for |typeinfo name for |VTT for |construction vtable for |guard variable for |non-virtual thunk to |virtual thunk to )/, "", d)
    # The name must start in namespace redlock: "redlock::..." possibly after a return type.
    if (d !~ /^([^(]* )?redlock::/) next
    if (d ~ /^([^(]* )?redlock::(.*::)?detail::/) next
    if (d ~ /\(anonymous namespace\)/) next
    print
  }' >"$tmp/candidates"
# The first name after redlock:: (after redlock::testing::) must be in a public header.
while IFS=$'\t' read -r mangled demangled; do
  name=${demangled%%(*}
  name=${name#*redlock::}
  name=${name#testing::}
  name=${name%%::*}
  name=${name%%<*}
  name=${name%%[*}
  if grep -qw -- "$name" "$headers"/*.h; then
    printf '%s\t%s\n' "$mangled" "$demangled"
  fi
done <"$tmp/candidates" >"$tmp/public"
nm -D --defined-only "$so" | awk '{ print $NF }' | sort -u >"$tmp/exported"

checked=0
missing=0
while IFS=$'\t' read -r mangled demangled; do
  checked=$((checked + 1))
  if ! grep -qxF "$mangled" "$tmp/exported"; then
    missing=$((missing + 1))
    echo "not exported by ${so##*/}: $demangled"
  fi
done <"$tmp/public"
if [ "$checked" -eq 0 ]; then
  echo "check-exports: no public symbol found in $* (wrong files?)"
  exit 1
fi
echo "check-exports: ${so##*/}: $((checked - missing)) of $checked public symbols exported"
[ "$missing" -eq 0 ]
