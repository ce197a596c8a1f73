// A renderer plugin written against plugins/api/renderer_api.h, for native_plugin_test and the
// native plugin farm test: it fills the frame (or a tile of it) with a gradient of the whole
// frame's pixel coordinates, row by row. It declares settings (width, height, offset added to
// blue, row_ms to slow each row down), renders tiles, and checkpoints: when a hand-back is asked
// for it stops after the current row and gives "frame F rows N" as its checkpoint, and a resumed
// render logs where it continues. It fails when the scene says "fail". Built twice: once as it
// should be, once claiming another ABI version (TSR_TEST_ABI).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "plugins/api/renderer_api.h"

#ifndef TSR_TEST_ABI
#define TSR_TEST_ABI TSR_RENDERER_ABI_VERSION
#endif

namespace {

const char* kDeclaration = R"(
scene:
  extensions: [.grad]
settings:
  width: {type: int, min: 1, max: 4096, default: 16, description: image width}
  height: {type: int, min: 1, max: 4096, default: 8, description: image height}
  offset: {type: float, min: 0, max: 100, default: 0, description: added to blue}
  row_ms: {type: int, min: 0, max: 10000, default: 0, description: sleep per row}
)";

int Setting(const nlohmann::json& s, const char* name, int fallback) {
  return s.contains(name) ? std::atoi(s[name].get<std::string>().c_str()) : fallback;
}

int Render(const TsrRenderRequest* r, TsrImage* out, char* error, uint64_t error_size) {
  const std::string scene(r->scene, r->scene_size);
  if (scene.rfind("fail", 0) == 0) {
    std::snprintf(error, error_size, "scene asked to fail at frame %d", r->frame);
    return TSR_RENDER_FAILED;
  }
  const nlohmann::json settings = nlohmann::json::parse(r->settings_json, nullptr, false);
  const int width = Setting(settings, "width", 16), height = Setting(settings, "height", 8);
  const float offset = settings.contains("offset")
                           ? std::strtof(settings["offset"].get<std::string>().c_str(), nullptr)
                           : 0.0f;
  const int row_ms = Setting(settings, "row_ms", 0);
  const bool tile = r->x1 > r->x0 && r->y1 > r->y0;
  const int x0 = tile ? r->x0 : 0, y0 = tile ? r->y0 : 0;
  const int w = tile ? r->x1 - r->x0 : width, h = tile ? r->y1 - r->y0 : height;
  int first_row = 0;
  if (r->resume != nullptr) {
    int frame = 0, rows = 0;
    const std::string resume(static_cast<const char*>(r->resume), r->resume_size);
    if (std::sscanf(resume.c_str(), "frame %d rows %d", &frame, &rows) == 2 && frame == r->frame) {
      first_row = rows;
      r->log(
          r->host,
          ("resuming frame " + std::to_string(frame) + " at row " + std::to_string(rows)).c_str());
    }
  }
  float* pixels = static_cast<float*>(std::malloc(sizeof(float) * w * h * 4));
  for (int y = 0; y < h; ++y) {
    if (r->cancelled(r->host)) {
      std::free(pixels);
      return TSR_RENDER_CANCELLED;
    }
    if (y > first_row && r->handback_requested(r->host)) {
      const std::string checkpoint =
          "frame " + std::to_string(r->frame) + " rows " + std::to_string(y);
      r->checkpoint(r->host, checkpoint.data(), checkpoint.size(), y);
      std::free(pixels);
      return TSR_RENDER_HANDED_BACK;
    }
    if (row_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(row_ms));
    for (int x = 0; x < w; ++x) {
      float* p = pixels + (static_cast<size_t>(y) * w + x) * 4;
      p[0] = static_cast<float>(x0 + x) / width;
      p[1] = static_cast<float>(y0 + y) / height;
      p[2] = static_cast<float>(r->frame) + offset;
      p[3] = 1.0f;
    }
    r->progress(r->host, static_cast<double>(y + 1) / h);
  }
  out->width = w;
  out->height = h;
  out->channels = 4;
  out->pixels = pixels;
  out->channel_names = nullptr;  // R, G, B, A
  out->backend = "gradient-cpu";
  return TSR_RENDER_OK;
}

void FreeImage(TsrImage* image) {
  std::free(image->pixels);
  image->pixels = nullptr;
}

const TsrRendererPlugin kPlugin = {TSR_TEST_ABI,
                                   "gradient",
                                   "1.0",
                                   "test gradient renderer",
                                   TSR_CAP_TILES | TSR_CAP_CHECKPOINT,
                                   kDeclaration,
                                   &Render,
                                   &FreeImage};

}  // namespace

extern "C" __attribute__((visibility("default"))) const TsrRendererPlugin* tsr_renderer_plugin() {
  return &kPlugin;
}
