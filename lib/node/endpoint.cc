#include "node/endpoint.h"

#include "node/cluster_endpoint.h"
#include "node/connection.h"

namespace redlock::detail {

std::unique_ptr<endpoint> make_endpoint(node_host& host, std::size_t index, const node_address& address,
                                        bool confirm_replication) {
  if (address.topology == node_address::deployment::cluster) {
    return std::make_unique<cluster_endpoint>(host, index, address);
  }
  auto c = std::make_unique<connection>(host, index, address);
  c->set_confirm_replication(confirm_replication);
  return c;
}

}  // namespace redlock::detail
