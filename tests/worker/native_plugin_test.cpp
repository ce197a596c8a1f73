// The C++ renderer plugin API: loading a shared library, the ABI version check, rendering a
// frame and a tile, progress, cancel and errors.

#include "worker/native_plugin.h"

#include <gtest/gtest.h>

namespace tessera::worker {
namespace {

TEST(NativePluginTest, LoadsAndRendersFramesAndTiles) {
  StatusOr<std::unique_ptr<NativePlugin>> plugin = NativePlugin::Load(TSR_TEST_PLUGIN);
  ASSERT_TRUE(plugin.ok()) << plugin.status().message();
  EXPECT_EQ((*plugin)->name(), "gradient");
  EXPECT_EQ((*plugin)->version(), "1.0");

  NativePlugin::Request request;
  request.frame = 3;
  double last_progress = 0;
  request.on_progress = [&](double f) { last_progress = f; };
  StatusOr<image::ImageBuffer> whole = (*plugin)->Render(request);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole->width, 16);
  EXPECT_EQ(whole->height, 8);
  EXPECT_DOUBLE_EQ(last_progress, 1.0);

  request.part.x0 = 4;
  request.part.y0 = 2;
  request.part.x1 = 12;
  request.part.y1 = 6;
  StatusOr<image::ImageBuffer> tile = (*plugin)->Render(request);
  ASSERT_TRUE(tile.ok()) << tile.status().message();
  ASSERT_EQ(tile->width, 8);
  ASSERT_EQ(tile->height, 4);
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 8 * 4; ++x) {
      ASSERT_EQ(tile->pixels[y * 8 * 4 + x], whole->pixels[(y + 2) * 16 * 4 + 4 * 4 + x]);
    }
  }
}

TEST(NativePluginTest, ErrorsAndCancelComeBackAsStatus) {
  StatusOr<std::unique_ptr<NativePlugin>> plugin = NativePlugin::Load(TSR_TEST_PLUGIN);
  ASSERT_TRUE(plugin.ok()) << plugin.status().message();
  NativePlugin::Request request;
  request.frame = 5;
  request.scene = "fail";
  StatusOr<image::ImageBuffer> failed = (*plugin)->Render(request);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "gradient: scene asked to fail at frame 5");
  std::atomic<bool> cancel{true};
  request.scene = "";
  request.cancel = &cancel;
  EXPECT_EQ((*plugin)->Render(request).status().code(), StatusCode::kCancelled);
}

TEST(NativePluginTest, RefusesAnotherAbiOrAMissingLibrary) {
  StatusOr<std::unique_ptr<NativePlugin>> old = NativePlugin::Load(TSR_TEST_PLUGIN_OTHER_ABI);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("built for renderer ABI 99"), std::string::npos)
      << old.status().message();
  StatusOr<std::unique_ptr<NativePlugin>> missing = NativePlugin::Load("/no/such/plugin.so");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot load"), std::string::npos);
}

}  // namespace
}  // namespace tessera::worker
