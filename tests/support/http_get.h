#pragma once
// Test support: a GET against the scheduler's HTTP server as a browser or Prometheus makes it
// (with the farm's admin token when it has one), body as it came: a downloaded output file, or
// the GET /metrics text (Prometheus exposition).

#include <httplib.h>

#include <string>

#include "tests/support/farm.h"

namespace tessera::testing {

// The body of GET `path`; *status gets the HTTP status (-1: no answer), *headers its headers.
inline std::string RawGet(LocalFarm& farm, const std::string& path, int* status = nullptr,
                          httplib::Headers* headers = nullptr) {
  httplib::Client client(farm.api_url());
  if (!farm.token().empty()) client.set_bearer_token_auth(farm.token());
  auto res = client.Get(path);
  if (status) *status = res ? res->status : -1;
  if (headers && res) *headers = res->headers;
  return res ? res->body : "";
}

// GET /metrics; "" when the scheduler did not answer 200.
inline std::string Metrics(LocalFarm& farm) {
  int status = 0;
  std::string body = RawGet(farm, "/metrics", &status);
  return status == 200 ? body : "";
}

}  // namespace tessera::testing
