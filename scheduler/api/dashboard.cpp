#include "scheduler/api/dashboard.h"

#include <httplib.h>

#include <string>

namespace tessera::api {

void ServeDashboard(httplib::Server& server) {
  for (const DashboardAsset& asset : DashboardAssets()) {
    // Routes are regular expressions: "/app.js" must not also match "/app-js".
    std::string pattern;
    for (char c : asset.path) {
      if (c == '.') pattern += '\\';
      pattern += c;
    }
    server.Get(pattern,
               [&asset](const httplib::Request&, httplib::Response& res) {
                 res.set_header("Cache-Control", "no-cache");
                 res.set_header("X-Content-Type-Options", "nosniff");
                 res.set_content(asset.body.data(), asset.body.size(),
                                 std::string(asset.content_type));
               });
  }
}

}  // namespace tessera::api
