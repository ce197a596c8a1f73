#pragma once
// Test support: the scheduler's GET /metrics text (Prometheus exposition), fetched with the
// farm's admin token when it has one; "" when the scheduler did not answer 200.

#include <httplib.h>

#include <string>

#include "tests/support/farm.h"

namespace tessera::testing {

inline std::string Metrics(LocalFarm& farm) {
  httplib::Client client(farm.api_url());
  if (!farm.token().empty()) client.set_bearer_token_auth(farm.token());
  auto res = client.Get("/metrics");
  return res && res->status == 200 ? res->body : "";
}

}  // namespace tessera::testing
