#include "shared/images/image_io.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace tessera::image {
namespace {

TEST(ImageIoTest, WritesAndReadsExrAndPng) {
  ImageBuffer img{3, 2, 4, {}};
  for (int i = 0; i < 6; ++i) {
    img.pixels.insert(img.pixels.end(), {0.1f * i, 0.5f, 2.0f, 1.0f});
  }
  std::string dir = ::testing::TempDir();
  ASSERT_TRUE(WriteExr(dir + "/t.exr", img, /*half=*/false).ok());
  ASSERT_TRUE(WriteSrgb8(dir + "/t.png", img).ok());

  auto exr = Read(dir + "/t.exr");
  ASSERT_TRUE(exr.ok()) << exr.status().ToString();
  EXPECT_EQ(exr->width, 3);
  EXPECT_EQ(exr->height, 2);
  EXPECT_EQ(exr->channels, 4);
  EXPECT_FLOAT_EQ(exr->pixels[4 * 5], 0.5f);
  EXPECT_FLOAT_EQ(exr->pixels[2], 2.0f) << "EXR keeps linear values above 1";

  auto png = Read(dir + "/t.png");
  ASSERT_TRUE(png.ok());
  EXPECT_EQ(png->channels, 3);
  EXPECT_FLOAT_EQ(png->pixels[2], 1.0f) << "PNG preview clamps";
  EXPECT_NEAR(png->pixels[1], LinearToSrgb(0.5f), 1.0 / 255);
  // No temporary files are left behind.
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

TEST(ImageIoTest, RejectsInconsistentBuffersAndBadPaths) {
  ImageBuffer img{4, 4, 4, std::vector<float>(10)};
  EXPECT_FALSE(WriteExr(::testing::TempDir() + "/bad.exr", img).ok());
  ImageBuffer ok{1, 1, 4, {1, 1, 1, 1}};
  EXPECT_FALSE(WriteExr("/nonexistent-dir/x.exr", ok).ok());
  EXPECT_FALSE(Read("/nonexistent-dir/x.exr").ok());
}

// A write that cannot be put in place leaves no hidden temporary file behind (the frame is written
// again later under another temporary name, and this one would stay forever).
TEST(ImageIoTest, AFailedWriteLeavesNoTemporaryFile) {
  const std::filesystem::path dir = ::testing::TempDir() + "/image-io-failed-rename";
  std::filesystem::remove_all(dir);
  // The final name is a folder with something in it: the rename over it fails.
  std::filesystem::create_directories(dir / "frame.png" / "inside");
  ImageBuffer img{2, 2, 4, std::vector<float>(16, 0.5f)};
  EXPECT_FALSE(WriteSrgb8((dir / "frame.png").string(), img).ok());
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(names, std::vector<std::string>{"frame.png"});
  std::filesystem::remove_all(dir);
}

// A renderer's broken output fails as what its name says, and formats no renderer writes are
// refused by name: no other reader is tried (the worker bundle has none of theirs).
TEST(ImageIoTest, ReadsOnlyWithTheReaderTheExtensionNames) {
  const std::string dir = ::testing::TempDir();
  ImageBuffer img{2, 2, 3, std::vector<float>(12, 0.5f)};
  ASSERT_TRUE(WriteSrgb8(dir + "/whole.png", img).ok());
  std::filesystem::copy_file(dir + "/whole.png", dir + "/cut.png",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(dir + "/cut.png", 40);
  EXPECT_FALSE(Read(dir + "/cut.png").ok());

  for (const char* name : {"shot.heic", "clip.MOV", "smoke.vdb", "scan.dcm", "photo.cr2"}) {
    std::filesystem::copy_file(dir + "/whole.png", dir + "/" + name,
                               std::filesystem::copy_options::overwrite_existing);
    StatusOr<ImageBuffer> read = Read(dir + "/" + name);
    ASSERT_FALSE(read.ok()) << name;
    EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument) << name;
    EXPECT_NE(read.status().message().find("files are not read"), std::string::npos)
        << read.status().message();
  }
}

TEST(ImageIoTest, SrgbTransfer) {
  EXPECT_FLOAT_EQ(LinearToSrgb(0.0f), 0.0f);
  EXPECT_FLOAT_EQ(LinearToSrgb(1.0f), 1.0f);
  EXPECT_NEAR(LinearToSrgb(0.18f), 0.4614f, 1e-3);
  EXPECT_FLOAT_EQ(LinearToSrgb(NAN), 0.0f);
}

}  // namespace
}  // namespace tessera::image

namespace tessera::image {
namespace {
TEST(ImageIoTest, WritesNamedAovChannelsIntoOneExr) {
  ImageBuffer img{2, 1, 5, {1, 2, 3, 1, 10, 4, 5, 6, 1, 20}, {"R", "G", "B", "A", "Z"}};
  std::string path = ::testing::TempDir() + "/aov.exr";
  ASSERT_TRUE(WriteExr(path, img, /*half=*/false).ok());
  auto back = Read(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->channels, 5);
  EXPECT_EQ(back->channel_names, (std::vector<std::string>{"R", "G", "B", "A", "Z"}));
  EXPECT_FLOAT_EQ(back->pixels[4], 10.0f);
  EXPECT_FLOAT_EQ(back->pixels[9], 20.0f);

  img.channel_names = {"R", "G"};
  EXPECT_FALSE(WriteExr(path, img).ok()) << "names must match the channel count";
}
}  // namespace
}  // namespace tessera::image
