// A program that uses redlock as an installed package, or as a subproject
// (tools/consumer-test.sh builds it each way): it takes and releases a lock on
// the real redis-server nodes of REDLOCK_NODES, then does the same in a
// simulated world (redlock/testing.h, the redlock::testing target). The README's
// library example is a program of its own (readme_example.cmake writes it out
// verbatim), built beside this one.
//
//   consumer NAME    prints "redlock VERSION: NAME ok" and exits 0, or says what failed and exits 1.
#include <redlock/redlock.h>
#include <redlock/testing.h>
#include <redlock/uv.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> split_nodes(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool fail(const std::string& what, const redlock::report& r) {
  std::cerr << "consumer: " << what << ": " << r.message() << "\n";
  return false;
}

// Takes `resource`, checks that a quorum of nodes holds its token, releases it,
// and checks that no node holds it any more.
bool take_and_release(redlock::client& c, const std::string& resource) {
  redlock::acquire_options o;
  o.ttl = std::chrono::seconds(10);
  auto r = c.acquire(resource, o);
  if (!r) return fail("acquire " + resource, r.report);
  const std::string token = r.lock.info().token;
  auto seen = c.inspect(resource);
  if (!seen.report) return fail("inspect", seen.report);
  if (seen.holder != token) {
    std::cerr << "consumer: inspect after acquire: the nodes do not hold this client's token\n";
    return false;
  }
  auto released = r.lock.release();
  if (!released) return fail("release " + resource, released);
  seen = c.inspect(resource);
  if (!seen.report) return fail("inspect", seen.report);
  if (seen.holder) {
    std::cerr << "consumer: inspect after release: the key is still there\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "consumer";
  const char* env = std::getenv("REDLOCK_NODES");
  if (env == nullptr || split_nodes(env).empty()) {
    std::cerr << "consumer: set REDLOCK_NODES to a comma-separated list of node URIs\n";
    return 1;
  }
  try {
    redlock::client_options opts;
    opts.nodes = split_nodes(env);
    redlock::client c(opts);
    if (!take_and_release(c, "consumer-test:" + name)) return 1;

    redlock::testing::world w;
    auto simulated = w.make_client();
    if (!take_and_release(*simulated, "consumer-test:" + name)) return 1;
  } catch (const redlock::config_error& e) {
    std::cerr << "consumer: " << e.what() << "\n";
    return 1;
  }
  std::cout << "redlock " << REDLOCK_VERSION_STRING << ": " << name << " ok\n";
  return 0;
}
