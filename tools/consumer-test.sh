#!/usr/bin/env bash
# Proves that redlock can be consumed: for a static and a shared build, builds
# and installs the library and the CLI into a temporary prefix, moves the prefix
# (the installed files must not depend on where they were installed), then
# builds tests/consumer/consumer.cc against it through find_package and
# pkg-config, and (static) once more with redlock as a subproject (add_subdirectory of
# this source tree), and runs each: it takes and releases a lock on three real
# redis-server nodes (and in a simulated world). Also: each installed header
# compiles alone as C++17, the shared library exports its whole public API
# (tools/check-exports.sh), and the Debian package (cpack -G DEB) installs
# (dpkg -i) and serves the same consumers from /usr, with its CLI (and man page,
# when the package has one).
#
# One line per check ("consumer find_package static: ok"), then
# "consumer tests: N passed, M failed" (tools/test.sh adds these to its totals).
# Exit 0 only if all passed.
#
# Environment:
#   REDLOCK_CONSUMER_DEB=0    skip the Debian package (needs dpkg, and root or sudo).
#   REDLOCK_CONSUMER_KEEP=1   keep the temporary directory (build trees, logs).
# The redis-servers listen on Unix sockets in the temporary directory (no port
# to collide with); they, and the package, are removed on exit, also on failure.
set -euo pipefail

cd "$(dirname "$0")/.."
src=$PWD
jobs=$(nproc)
[ "$jobs" -gt 2 ] && jobs=2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/redlock-consumer.XXXXXX")
passed=0
failed=0
node_pids=()
deb_installed=0
deb_lib="" deb_dev="" deb_cli=""
deb_packages=(libredlock0 libredlock-dev redlock)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

version=$(sed -nE 's/^#define REDLOCK_VERSION_(MAJOR|MINOR|PATCH) +([0-9]+)$/\2/p' include/redlock/version.h | paste -sd.)
cmake_args=(-DCMAKE_BUILD_TYPE=Release)
if command -v ccache >/dev/null 2>&1; then
  cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi

cleanup() {
  local pid i
  for pid in "${node_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${node_pids[@]}"; do # bounded: 5 s each, then SIGKILL
    for ((i = 0; i < 100; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -9 "$pid" 2>/dev/null || true
  done
  if [ "$deb_installed" = 1 ]; then
    $SUDO dpkg -P redlock libredlock-dev "${deb_packages[0]}" >/dev/null 2>&1 ||
      echo "consumer-test: dpkg -P ${deb_packages[*]} failed" >&2
  fi
  if [ "${REDLOCK_CONSUMER_KEEP:-0}" = 1 ]; then
    echo "consumer-test: kept $tmp"
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ok() { # name
  echo "consumer $1: ok"
  passed=$((passed + 1))
}

bad() { # name, log: prints the log's tail
  echo "consumer $1: FAILED"
  if [ -f "$2" ]; then tail -n 40 "$2" | sed 's/^/   | /'; fi
  failed=$((failed + 1))
}

check() { # name, command...: runs the command with its output in a log; ok or FAILED
  local name=$1 log
  shift
  log="$tmp/log/$(tr -c 'a-zA-Z0-9._-' _ <<<"$name").log"
  if "$@" >"$log" 2>&1; then ok "$name"; else bad "$name" "$log"; fi
}

start_nodes() { # three redis-servers on Unix sockets; sets REDLOCK_NODES
  local i sock uris=() tries
  for i in 1 2 3; do
    mkdir -p "$tmp/nodes/$i"
    redis-server --port 0 --unixsocket "$tmp/nodes/$i/redis.sock" --unixsocketperm 700 --save "" \
      --appendonly no --daemonize no --dir "$tmp/nodes/$i" --logfile "$tmp/nodes/$i/redis.log" &
    node_pids+=($!)
    uris+=("unix://$tmp/nodes/$i/redis.sock")
  done
  for i in 1 2 3; do
    sock="$tmp/nodes/$i/redis.sock"
    for ((tries = 0; tries < 100; tries++)); do
      [ -S "$sock" ] && redis-cli -s "$sock" ping >/dev/null 2>&1 && break
      sleep 0.05
    done
    redis-cli -s "$sock" ping >/dev/null 2>&1 || { echo "consumer-test: node $i did not start" >&2; return 1; }
  done
  REDLOCK_NODES=$(IFS=,; echo "${uris[*]}")
  export REDLOCK_NODES
}

run_consumer() { # binary, name: runs it; its output must say so
  local out
  out=$("$1" "$2")
  echo "$out"
  [ "$out" = "redlock $version: $2 ok" ]
}

build_library() { # variant (static|shared), build dir, install prefix, cmake args...
  local variant=$1 dir=$2 prefix=$3
  shift 3
  local shared=OFF
  [ "$variant" = shared ] && shared=ON
  cmake -S "$src" -B "$dir" "${cmake_args[@]}" -DBUILD_SHARED_LIBS=$shared -DREDLOCK_BUILD_TESTS=OFF \
    -DREDLOCK_BUILD_BENCH=OFF -DREDLOCK_BUILD_TOOLS=ON -DREDLOCK_WERROR=ON "$@" &&
    cmake --build "$dir" -j"$jobs" &&
    cmake --install "$dir" --prefix "$prefix"
}

pc_dir() { # prefix: the directory holding redlock.pc
  dirname "$(find "$1" -name redlock.pc -path '*/pkgconfig/*' | head -n 1)"
}

headers_compile() { # prefix: each installed public header compiles alone (C++17, pedantic, -Werror)
  local h n=0
  for h in "$1"/include/redlock/*.h; do
    printf '#include <redlock/%s>\n#include <redlock/%s>\n' "${h##*/}" "${h##*/}" |
      c++ -std=c++17 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror -fsyntax-only -I"$1/include" -x c++ - ||
      return 1
    n=$((n + 1))
  done
  echo "$n headers"
  [ "$n" -gt 0 ]
}

consumer_find_package() { # variant, prefix ("" = the system's), build dir
  local prefix_args=()
  [ -n "$2" ] && prefix_args=(-DCMAKE_PREFIX_PATH="$2")
  env -u CMAKE_PREFIX_PATH cmake -S "$src/tests/consumer/find_package" -B "$3" "${cmake_args[@]}" \
    "${prefix_args[@]}" -DREDLOCK_EXPECTED_VERSION="$version" &&
    cmake --build "$3" -j"$jobs" &&
    run_consumer "$3/consumer" "find_package-$1"
}

consumer_pkg_config() { # variant, prefix ("" = the system's), build dir
  local variant=$1 dir=$3 static=() rpath=() libdir
  mkdir -p "$dir"
  if [ -n "$2" ]; then
    PKG_CONFIG_PATH=$(pc_dir "$2")
    export PKG_CONFIG_PATH
  else
    unset PKG_CONFIG_PATH
  fi
  [ "$variant" = static ] && static=(--static)
  pkg-config --exists --print-errors "redlock = $version" redlock-testing || return 1
  libdir=$(pkg-config --variable=libdir redlock)
  [ "$variant" = shared ] && rpath=("-Wl,-rpath,$libdir")
  # shellcheck disable=SC2046 # pkg-config's output is a list of arguments
  (
    set -x
    c++ -std=c++17 -O1 -Wall -Wextra -Werror -o "$dir/consumer" "$src/tests/consumer/consumer.cc" \
      $(pkg-config --cflags redlock-testing) "${rpath[@]}" $(pkg-config "${static[@]}" --libs redlock-testing)
  ) || return 1
  if [ "$variant" = static ]; then # no libredlock*.so may be needed at run time
    if ldd "$dir/consumer" | grep -q libredlock; then echo "linked a shared libredlock"; return 1; fi
  fi
  run_consumer "$dir/consumer" "pkg-config-$variant"
}

readme_commands() { # prefix ("" = the system's): the README's pkg-config commands, verbatim
  # but for the prefix its install command names (/opt/redlock)
  awk '/^```sh$/ { block = ""; inside = 1; next }
       inside && /^```$/ { if (block ~ /pkg-config --cflags --libs redlock/) { printf "%s", block; exit } inside = 0; next }
       inside { block = block $0 "\n" }' "$src/README.md" |
    if [ -n "$1" ]; then sed "s|/opt/redlock|$1|g"; else grep -v '^export PKG_CONFIG_PATH='; fi
}

readme_example() { # prefix ("" = the system's), dir: README's first C++ block (verbatim, app.cc)
  # built by the README's own pkg-config command line
  local commands
  mkdir -p "$2"
  cmake -DREADME="$src/README.md" -DOUT="$2/app.cc" -P "$src/tests/consumer/readme_example.cmake" || return 1
  commands=$(readme_commands "$1")
  grep -q 'app.cc' <<<"$commands" || { echo "README.md has no pkg-config command line for app.cc"; return 1; }
  echo "$commands"
  (cd "$2" && env -u PKG_CONFIG_PATH bash -euxc "$commands") || return 1
  [ -x "$2/a.out" ] || { echo "no a.out"; return 1; }
  ldd "$2/a.out" | grep -q 'libredlock' && echo "(a.out uses the shared libredlock)"
  return 0
}

consumer_subproject() { # variant, build dir: redlock's source tree as add_subdirectory
  local shared=OFF files
  [ "$1" = shared ] && shared=ON
  # No CMAKE_BUILD_TYPE: the subproject must leave it empty (checked in its CMakeLists.txt).
  cmake -S "$src/tests/consumer/subproject" -B "$2" -DREDLOCK_SOURCE_DIR="$src" -DBUILD_SHARED_LIBS=$shared \
    "${cmake_args[@]:1}" &&
    cmake --build "$2" -j"$jobs" &&
    cmake --install "$2" --prefix "$2/installed" || return 1
  files=$(cd "$2/installed" && find . -type f | sort)
  echo "installed: $files"
  [ "$files" = "./bin/consumer" ] || { echo "the parent's install got more than its consumer"; return 1; }
  run_consumer "$2/consumer" "subproject-$1"
}

variant() { # static|shared
  local v=$1 prefix b t0=$SECONDS
  prefix="$tmp/prefix-$v"
  b="$tmp/build-$v"
  if ! build_library "$v" "$b" "$tmp/installed-$v" >"$tmp/log/library-$v.log" 2>&1; then
    bad "library $v (build and install)" "$tmp/log/library-$v.log"
    failed=$((failed + 5)) # the checks below that need it
    [ "$v" = static ] && failed=$((failed + 1)) # and the subproject
    return 0
  fi
  mv "$tmp/installed-$v" "$prefix" # relocation: everything below uses the moved prefix
  ok "library $v (build, install, move the prefix: $((SECONDS - t0)) s)"
  check "headers $v (each installed header alone, C++17)" headers_compile "$prefix"
  check "find_package $v (moved prefix)" consumer_find_package "$v" "$prefix" "$tmp/fp-$v"
  check "pkg-config $v (moved prefix)" consumer_pkg_config "$v" "$prefix" "$tmp/pc-$v"
  check "readme $v (README's first C++ block, README's pkg-config command)" readme_example "$prefix" "$tmp/readme-$v"
  # The subproject once, static (FetchContent's usual case; BUILD_SHARED_LIBS is the
  # parent's, and the shared library is proven by the package builds): its build is
  # the library's third, and CI's time is budgeted (issue 20).
  if [ "$v" = static ]; then
    check "subproject $v" consumer_subproject "$v" "$tmp/sub-$v"
  fi
  if [ "$v" = shared ]; then
    check "cli shared (moved prefix, RPATH)" bash -c "[ \"\$('$prefix/bin/redlock' --version)\" = 'redlock $version' ]"
  else
    check "cli static" bash -c "[ \"\$('$prefix/bin/redlock' --version)\" = 'redlock $version' ]"
  fi
}

deb_build() { # cpack -G DEB in $tmp/build-shared: sets deb_lib, deb_dev, deb_cli, deb_packages
  local so soname want
  (cd "$tmp/build-shared" && cpack -G DEB -B "$tmp/deb") || return 1
  deb_lib=$(find "$tmp/deb" -maxdepth 1 -name 'libredlock0*_*.deb')
  deb_dev=$(find "$tmp/deb" -maxdepth 1 -name 'libredlock-dev_*.deb')
  deb_cli=$(find "$tmp/deb" -maxdepth 1 -name 'redlock_*.deb')
  ls "$tmp/deb"/*.deb
  [ "$(find "$tmp/deb" -maxdepth 1 -name '*.deb' | wc -l)" = 3 ] || { echo "cpack made other than three packages"; return 1; }
  for f in "$deb_lib" "$deb_dev" "$deb_cli"; do
    if [ -z "$f" ] || [ "$(wc -l <<<"$f")" != 1 ]; then
      echo "expected libredlock0*, libredlock-dev and redlock"
      return 1
    fi
    dpkg-deb --info "$f"
    dpkg-deb --contents "$f"
  done
  deb_packages=("$(dpkg-deb -f "$deb_lib" Package)" libredlock-dev redlock)
  # The library package is named for the SONAME (libredlock.so.0.2: libredlock0.2)
  # and has the shared libraries only.
  mkdir -p "$tmp/deb/lib"
  dpkg-deb -x "$deb_lib" "$tmp/deb/lib"
  so=$(find "$tmp/deb/lib" -name 'libredlock.so.*' -type f | head -n 1)
  soname=$(readelf -d "$so" | sed -nE 's/.*Library soname: \[(.*)\]/\1/p')
  want=${soname%%.so.*}${soname##*.so.} # Debian's rule for a name that does not end in a digit
  echo "SONAME $soname, package ${deb_packages[0]}"
  [ "${deb_packages[0]}" = "$want" ] || { echo "the library package should be $want"; return 1; }
  if find "$tmp/deb/lib" -type f ! -name 'lib*.so.*' ! -path '*/usr/share/doc/*' | grep .; then
    echo "the library package has more than the shared libraries"
    return 1
  fi
}

deb_lintian() { # lintian on the three packages: no error (E:)
  local out
  command -v lintian >/dev/null || { echo "lintian is not installed (tools/deps.sh installs it)"; return 1; }
  out=$(lintian --no-cfg "$deb_lib" "$deb_dev" "$deb_cli" 2>&1) || true
  echo "$out"
  echo "lintian: $(grep -c '^E:' <<<"$out") errors, $(grep -c '^W:' <<<"$out") warnings"
  ! grep -q '^E:' <<<"$out"
}

deb_cli_alone() { # dpkg -i of the library and CLI packages into a root that has no -dev package
  local root=$tmp/clean-root admin depends libdir out rc
  depends=$(dpkg-deb -f "$deb_cli" Depends)
  echo "redlock Depends: $depends"
  if grep -Eq -- '-dev([ ,(]|$)' <<<"$depends"; then echo "the CLI package depends on a -dev package"; return 1; fi
  # The root's package database is this machine's without any -dev package (no
  # headers, no compiler's headers): dpkg refuses a package whose Depends it lacks.
  admin=$root/var/lib/dpkg
  mkdir -p "$admin/info" "$admin/updates" "$admin/triggers" "$root/var/log"
  awk -v RS= -v ORS='\n\n' '!/(^|\n)Package: [^\n]*-dev\n/ && !/(^|\n)Package: (redlock|libredlock[^\n]*)\n/' \
    /var/lib/dpkg/status >"$admin/status"
  : >"$admin/available"
  echo "clean root: $(grep -c '^Package:' "$admin/status") packages, $(grep -c '^Package: .*-dev$' "$admin/status") of them -dev"
  # Maintainer scripts run outside the root (its postinst calls ldconfig, which the root lacks).
  # (The root has no file lists of the packages in its database: dpkg's warnings about them are dropped.)
  rc=0
  out=$($SUDO dpkg --root="$root" --force-script-chrootless -i "$deb_lib" "$deb_cli" 2>&1) || rc=$?
  grep -v "^dpkg: warning: files list file for package '.*' missing" <<<"$out" || true
  [ "$rc" = 0 ] || return 1
  libdir=$(dirname "$(find "$root/usr/lib" -name 'libredlock.so.*' -type f | head -n 1)")
  out=$(LD_LIBRARY_PATH=$libdir "$root/usr/bin/redlock" --version) || return 1
  echo "clean root redlock --version: $out"
  [ "$out" = "redlock $version" ] || return 1
  # The check can tell: the -dev package needs what the root lacks.
  rc=0
  out=$($SUDO dpkg --root="$root" --force-script-chrootless -i "$deb_dev" 2>&1) || rc=$?
  out=$(grep -v "^dpkg: warning: files list file for package '.*' missing" <<<"$out" || true)
  echo "$out"
  if [ "$rc" = 0 ]; then
    echo "libredlock-dev installed into a root without libhiredis-dev: the root is not clean"
    return 1
  fi
  grep -q 'libhiredis-dev' <<<"$out"
}

deb_install() { # dpkg -i of the three packages on this machine, as a developer would
  local p
  for p in redlock libredlock-dev "${deb_packages[0]}"; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      echo "the package $p is installed already; not replacing it"
      return 1
    fi
  done
  deb_installed=1
  $SUDO dpkg -i "$deb_lib" "$deb_dev" "$deb_cli"
}

deb_cli() { # the installed CLI; its man page and bash completion when the package has them
  local man
  [ "$(/usr/bin/redlock --version)" = "redlock $version" ] || return 1
  echo "/usr/bin/redlock --version: redlock $version"
  man=$(dpkg -L redlock | grep -E '/man1/redlock\.1(\.gz)?$' | head -n 1 || true)
  if [ -z "$man" ]; then
    echo "(the package has no man page)"
  elif [ ! -f "$man" ]; then # e.g. a dpkg path-exclude for /usr/share/man in a slim image
    echo "$man is in the package but was not installed (dpkg path-exclude?)"
    grep -hs path-exclude /etc/dpkg/dpkg.cfg.d/* || return 1
  elif command -v man >/dev/null 2>&1; then
    man -w redlock
  else
    echo "$man installed (no man command to ask)"
  fi
  if dpkg -L redlock | grep -q 'bash-completion/completions/redlock$'; then
    echo "bash completion: $(dpkg -L redlock | grep 'bash-completion/completions/redlock$')"
  fi
}

main() {
  local t0=$SECONDS t1
  mkdir -p "$tmp/log"
  command -v redis-server >/dev/null || { echo "consumer-test: redis-server not found"; exit 1; }
  if ! start_nodes >"$tmp/log/nodes.log" 2>&1; then
    bad "redis-server nodes" "$tmp/log/nodes.log"
    echo "consumer tests: $passed passed, $failed failed"
    exit 1
  fi
  variant static
  variant shared
  if [ -f "$tmp/installed-shared/include/redlock/version.h" ] || [ -d "$tmp/prefix-shared" ]; then
    check "exports shared (tools/check-exports.sh)" bash -c "
      so=\$(find '$tmp/prefix-shared' -name libredlock.so | head -n 1)
      so_t=\$(find '$tmp/prefix-shared' -name libredlock_testing.so | head -n 1)
      bash tools/check-exports.sh \"\$so\" \$(find '$tmp/build-shared/CMakeFiles/redlock.dir/lib' -name '*.o' | sort) &&
      bash tools/check-exports.sh \"\$so_t\" \$(find '$tmp/build-shared/CMakeFiles/redlock_testing.dir/lib' -name '*.o' | sort)"
  fi
  if [ "${REDLOCK_CONSUMER_DEB:-1}" = 1 ]; then
    t1=$SECONDS
    # The package is the machine's, not this run's: two runs of this script at once
    # (two checkouts tested side by side) take turns, from the install to the purge
    # at exit (the lock's descriptor closes with the script). Bounded wait.
    exec 9>/tmp/redlock-consumer-deb.lock
    if ! flock -w 1800 9; then
      echo "another run held /tmp/redlock-consumer-deb.lock for 30 min" >"$tmp/log/deb.log"
      bad "deb (waiting for another run's package test)" "$tmp/log/deb.log"
      failed=$((failed + 3))
    # The shared build again, for the prefix /usr (libdir lib/<multiarch>, no RPATH): relinks only.
    elif ! { cmake -S "$src" -B "$tmp/build-shared" -DCMAKE_INSTALL_PREFIX=/usr >"$tmp/log/deb.log" 2>&1 &&
      cmake --build "$tmp/build-shared" -j"$jobs" >>"$tmp/log/deb.log" 2>&1 &&
      deb_build >>"$tmp/log/deb.log" 2>&1; }; then
      bad "deb (cpack -G DEB: libredlock0.MINOR, libredlock-dev, redlock)" "$tmp/log/deb.log"
      failed=$((failed + 7))
    else
      ok "deb (cpack -G DEB: ${deb_packages[*]}: $((SECONDS - t1)) s)"
      check "deb lintian (no E:)" deb_lintian
      check "deb cli alone (dpkg -i into a root without -dev packages, redlock --version)" deb_cli_alone
      if deb_install >"$tmp/log/deb-install.log" 2>&1; then
        ok "deb install (dpkg -i of the three)"
        check "find_package deb (/usr)" consumer_find_package deb "" "$tmp/fp-deb"
        check "pkg-config deb (/usr)" consumer_pkg_config shared "" "$tmp/pc-deb"
        check "readme deb (README's first C++ block, README's pkg-config command, /usr)" readme_example "" "$tmp/readme-deb"
        check "cli deb (/usr/bin/redlock --version, man page)" deb_cli
      else
        bad "deb install (dpkg -i of the three)" "$tmp/log/deb-install.log"
        failed=$((failed + 4))
      fi
    fi
  fi
  echo "consumer-test: $((SECONDS - t0)) s"
  echo "consumer tests: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

main "$@"
