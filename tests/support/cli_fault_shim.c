/* An LD_PRELOAD shim for the CLI tests (tests/cli/cli_test.cc, CliGuard): opens the
 * race windows of `redlock run`/`elect` wide, in a process named "redlock" only (the
 * command it runs inherits the shim, unaffected).
 *
 *   REDLOCK_SHIM_KILL_AFTER_FORK=N   the tool SIGKILLs itself in the parent right after
 *                                    its Nth fork() returns (2: the fork of CMD).
 *   REDLOCK_SHIM_SETSID_DELAY_MS=M   setsid() sleeps M ms first (the watcher's setsid).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pid_t initial_pid;
static int forks;

__attribute__((constructor)) static void shim_init(void) { initial_pid = getpid(); }

static int is_tool(void) { return strcmp(program_invocation_short_name, "redlock") == 0; }

/* The next definition of `name` (libc's), without -Wpedantic's object-to-function
 * pointer cast. */
typedef pid_t (*pid_fn)(void);
static pid_fn next_pid_fn(const char* name) {
  pid_fn f;
  void* sym = dlsym(RTLD_NEXT, name);
  memcpy(&f, &sym, sizeof f);
  return f;
}

static int env_int(const char* name) {
  const char* v = getenv(name);
  return v != NULL ? atoi(v) : 0;
}

__attribute__((visibility("default"))) pid_t fork(void) {
  const pid_fn real = next_pid_fn("fork");
  const pid_t p = real();
  if (p > 0 && is_tool() && getpid() == initial_pid) {
    ++forks;
    if (env_int("REDLOCK_SHIM_KILL_AFTER_FORK") == forks) raise(SIGKILL);
  }
  return p;
}

__attribute__((visibility("default"))) pid_t setsid(void) {
  const pid_fn real = next_pid_fn("setsid");
  const int ms = env_int("REDLOCK_SHIM_SETSID_DELAY_MS");
  if (ms > 0 && is_tool()) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  return real();
}
