#pragma once
// The farm dashboard: a single-page app (scheduler/api/dashboard/: HTML, CSS and ES modules, no
// build step and no external assets, so it works on an air-gapped farm) compiled into the
// scheduler by CMake (embed_dashboard.cmake) and served without a token: the page asks for one
// and sends it with every API call.

#include <span>
#include <string_view>

#include "scheduler/http/router.h"

namespace tessera::api {

struct DashboardAsset {
  std::string_view path;          // "/", "/app.js", ...
  std::string_view content_type;  // with its charset
  std::string_view body;
};

// Every file of the dashboard, as embedded at build time (generated dashboard_assets.cpp).
std::span<const DashboardAsset> DashboardAssets();

// Registers GET for each asset (index.html at "/"), with Cache-Control: no-cache so a browser
// revalidates after a scheduler upgrade instead of mixing old and new files.
void ServeDashboard(http::Router& router);

}  // namespace tessera::api
