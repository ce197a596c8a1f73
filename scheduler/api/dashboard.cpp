#include "scheduler/api/dashboard.h"

#include <string>

namespace tessera::api {

namespace {
// The page loads nothing but its own files and talks to nothing but its own API: a value that
// slipped past escaping could neither run script nor send data elsewhere, and no other site may
// frame the page to trick a click on "Cancel job". Thumbnails and the job page's movies are
// blob: URLs (fetched with the token); bars set their width in style attributes.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' blob: data:; media-src blob:; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'";
}  // namespace

void ServeDashboard(http::Router& router) {
  for (const DashboardAsset& asset : DashboardAssets()) {
    // Route patterns escape '.' ("/app.js" is literal text).
    std::string pattern;
    for (char c : asset.path) {
      if (c == '.') pattern += '\\';
      pattern += c;
    }
    router.Add("GET", pattern, [&asset](const http::Request&, http::Response& res) {
      res.SetHeader("Cache-Control", "no-cache");
      res.SetHeader("Content-Security-Policy", kContentSecurityPolicy);
      // For browsers that predate CSP's frame-ancestors.
      res.SetHeader("X-Frame-Options", "DENY");
      res.SetContent(std::string(asset.body), std::string(asset.content_type));
    });
  }
}

}  // namespace tessera::api
