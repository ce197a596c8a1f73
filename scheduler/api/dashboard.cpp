#include "scheduler/api/dashboard.h"

#include <httplib.h>

#include <string>

namespace tessera::api {

namespace {
// The page loads nothing but its own files and talks to nothing but its own API: a value that
// slipped past escaping could neither run script nor send data elsewhere, and no other site may
// frame the page to trick a click on "Cancel job". Thumbnails are blob: URLs; bars set their
// width in style attributes.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' blob: data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";
}  // namespace

void ServeDashboard(httplib::Server& server) {
  for (const DashboardAsset& asset : DashboardAssets()) {
    // Routes are regular expressions: "/app.js" must not also match "/app-js".
    std::string pattern;
    for (char c : asset.path) {
      if (c == '.') pattern += '\\';
      pattern += c;
    }
    server.Get(pattern, [&asset](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Content-Security-Policy", kContentSecurityPolicy);
      res.set_content(asset.body.data(), asset.body.size(), std::string(asset.content_type));
    });
  }
}

}  // namespace tessera::api
