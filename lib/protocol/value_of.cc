#include "protocol/value_of.h"

namespace redlock::detail {

resp_value value_of(const redisReply& r) {
  resp_value v;
  switch (r.type) {
    case REDIS_REPLY_NIL:
      v.type = resp_value::kind::nil;
      break;
    case REDIS_REPLY_STRING:
      v.type = resp_value::kind::string;
      v.text.assign(r.str, r.len);
      break;
    case REDIS_REPLY_STATUS:
      v.type = resp_value::kind::status;
      v.text.assign(r.str, r.len);
      break;
    case REDIS_REPLY_INTEGER:
      v.type = resp_value::kind::integer;
      v.integer = r.integer;
      break;
    case REDIS_REPLY_ARRAY:
      v.type = resp_value::kind::array;
      v.elements.reserve(r.elements);
      for (std::size_t i = 0; i < r.elements; ++i) v.elements.push_back(value_of(*r.element[i]));
      break;
    default:
      v.type = resp_value::kind::other;
      break;
  }
  return v;
}

}  // namespace redlock::detail
