// A renderer plugin written against plugins/api/renderer_api.h, for native_plugin_test: it fills
// the tile with a gradient of the whole frame's pixel coordinates, reports progress, honours
// cancel, and fails when the scene says "fail". Built twice: once as it should be, once
// claiming another ABI version (TSR_TEST_ABI).

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "plugins/api/renderer_api.h"

#ifndef TSR_TEST_ABI
#define TSR_TEST_ABI TSR_RENDERER_ABI_VERSION
#endif

namespace {

constexpr int kWidth = 16, kHeight = 8;

int Render(const TsrRenderRequest* r, TsrImage* out, char* error, uint64_t error_size) {
  const std::string scene(r->scene, r->scene_size);
  if (scene == "fail") {
    std::snprintf(error, error_size, "scene asked to fail at frame %d", r->frame);
    return 1;
  }
  const bool tile = r->x1 > r->x0 && r->y1 > r->y0;
  const int x0 = tile ? r->x0 : 0, y0 = tile ? r->y0 : 0;
  const int w = tile ? r->x1 - r->x0 : kWidth, h = tile ? r->y1 - r->y0 : kHeight;
  out->width = w;
  out->height = h;
  out->channels = 4;
  out->pixels = static_cast<float*>(std::malloc(sizeof(float) * w * h * 4));
  for (int y = 0; y < h; ++y) {
    if (r->cancelled(r->host)) {
      std::free(out->pixels);
      std::snprintf(error, error_size, "cancelled");
      return 1;
    }
    for (int x = 0; x < w; ++x) {
      float* p = out->pixels + (static_cast<size_t>(y) * w + x) * 4;
      p[0] = static_cast<float>(x0 + x) / kWidth;
      p[1] = static_cast<float>(y0 + y) / kHeight;
      p[2] = static_cast<float>(r->frame);
      p[3] = 1.0f;
    }
    r->progress(r->host, static_cast<double>(y + 1) / h);
  }
  return 0;
}

void FreeImage(TsrImage* image) {
  std::free(image->pixels);
  image->pixels = nullptr;
}

const TsrRendererPlugin kPlugin = {TSR_TEST_ABI, "gradient", "1.0", &Render, &FreeImage};

}  // namespace

extern "C" __attribute__((visibility("default"))) const TsrRendererPlugin* tsr_renderer_plugin() {
  return &kPlugin;
}
