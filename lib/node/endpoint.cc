#include "node/endpoint.h"

#include "node/cluster_endpoint.h"
#include "node/connection.h"
#include "node/sentinel_endpoint.h"

namespace redlock::detail {

std::unique_ptr<endpoint> make_endpoint(node_host& host, std::size_t index, const node_address& address,
                                        replication_confirmation confirm) {
  const bool off = confirm == replication_confirmation::nowhere;
  if (address.topology == node_address::deployment::cluster) {
    return std::make_unique<cluster_endpoint>(host, index, address, !off);
  }
  if (address.topology == node_address::deployment::sentinel) {
    return std::make_unique<sentinel_endpoint>(host, index, address, !off);
  }
  auto c = std::make_unique<connection>(host, index, address);
  c->set_confirm_replication(confirm == replication_confirmation::everywhere);
  return c;
}

}  // namespace redlock::detail
