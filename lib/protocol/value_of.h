// hiredis's reply tree as a resp_value (protocol/value.h); for the layers that
// parse replies (ops/plain_round.cc). An error reply is `other`: the caller
// handles errors before it asks for the value.
#pragma once

#include <hiredis/hiredis.h>

#include "protocol/value.h"

namespace redlock::detail {

resp_value value_of(const redisReply& r);

}  // namespace redlock::detail
