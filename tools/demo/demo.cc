// The README's demo: take, extend and release a lock on the configured nodes and
// print what each step did, node by node.
//
//   redlock_demo redis://127.0.0.1:7001 redis://127.0.0.1:7002 ...
//   (or REDLOCK_NODES=uri,uri,... redlock_demo)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "redlock/redlock.h"

namespace {

void print_nodes(const redlock::report& r) {
  for (const auto& n : r.nodes) {
    std::printf("    %-28s %-16s %6lld us %s\n", n.node.c_str(), redlock::to_string(n.status),
                static_cast<long long>(n.latency.count()), n.detail.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  redlock::client_options options;
  for (int i = 1; i < argc; ++i) options.nodes.push_back(argv[i]);
  if (options.nodes.empty()) {
    if (const char* env = std::getenv("REDLOCK_NODES")) {
      std::stringstream ss(env);
      for (std::string uri; std::getline(ss, uri, ',');) options.nodes.push_back(uri);
    }
  }
  try {
    redlock::client client(options);
    redlock::client rival(options);
    std::printf("redlock %s demo: %zu nodes, quorum %zu\n", REDLOCK_VERSION_STRING, client.node_count(),
                client.quorum());

    redlock::acquire_options o;
    o.ttl = 10s;
    o.fencing = true;
    auto got = client.acquire("demo:report-job", o);
    std::printf("\n1. acquire demo:report-job (ttl 10 s, fencing): %s\n", got.report.message().c_str());
    print_nodes(got.report);
    if (!got) return 1;
    const std::uint64_t first_fence = got.lock.fence().value_or(0);
    std::printf("   fence token %llu, validity %lld ms\n",
                static_cast<unsigned long long>(got.lock.fence().value_or(0)),
                static_cast<long long>(got.lock.remaining_validity().count()));

    redlock::acquire_options once;
    once.ttl = 2s;
    once.retry = redlock::retry_policy::once();
    auto other = rival.acquire("demo:report-job", once);
    std::printf("\n2. a second client tries the same resource: %s\n", other.report.message().c_str());

    auto ext = got.lock.extend(30s);
    std::printf("\n3. extend to 30 s: %s\n", ext.message().c_str());
    print_nodes(ext);

    auto status = client.inspect("demo:report-job");
    std::printf("\n4. inspect: holder is %s on a quorum\n", status.holder ? "this owner" : "nobody");
    for (std::size_t i = 0; i < status.nodes.size(); ++i) {
      std::printf("    %-28s pttl %lld ms\n", status.report.nodes[i].node.c_str(),
                  static_cast<long long>(status.nodes[i].pttl.count()));
    }

    auto rel = got.lock.release();
    std::printf("\n5. release: %s\n", rel.message().c_str());
    print_nodes(rel);

    once.fencing = true;
    auto after = rival.acquire("demo:report-job", once);
    std::printf("\n6. the second client tries again, with fencing: %s (fence %llu > %llu)\n",
                after.report.message().c_str(),
                static_cast<unsigned long long>(after.lock.fence().value_or(0)),
                static_cast<unsigned long long>(first_fence));
    if (!rel || !after || after.lock.fence().value_or(0) <= first_fence) return 1;
    std::printf("\ndemo ok\n");
    return 0;
  } catch (const redlock::config_error& e) {
    std::fprintf(stderr, "redlock_demo: %s\n", e.what());
    return 64;
  }
}
