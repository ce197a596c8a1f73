// ResultSpool: results kept on disk until the scheduler acknowledges them, and read back for
// re-sending without copying their payloads.

#include "worker/result_spool.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tessera::worker {
namespace {

namespace fs = std::filesystem;

std::vector<zmq::message_t> Message(const std::string& body, size_t payload_bytes) {
  std::vector<zmq::message_t> frames;
  frames.emplace_back(std::string_view("HDR!"));
  frames.emplace_back(body.data(), body.size());
  if (payload_bytes > 0) {
    std::string payload(payload_bytes, '\0');
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7 + 3);
    frames.emplace_back(payload.data(), payload.size());
  }
  return frames;
}

class ResultSpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-spool-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ResultSpoolTest, ReplaysEveryMessageByteForByteInOrderUntilAcknowledged) {
  ResultSpool spool(dir_.string());
  ASSERT_TRUE(spool.Open().ok());
  const protocol::TaskRef a{7, 1}, b{8, 2};
  const auto progress = Message("progress", 0);
  const auto big = Message("frame", 5 * 1024 * 1024 + 13);  // above the mapped-frame threshold
  const auto small = Message("done", 1000);
  ASSERT_TRUE(spool.Add(a, progress, /*final=*/false).ok());
  ASSERT_TRUE(spool.Add(a, big, /*final=*/true).ok());
  ASSERT_TRUE(spool.Add(b, small, /*final=*/true).ok());

  // A new spool over the same folder, as after a worker restart.
  ResultSpool again(dir_.string());
  ASSERT_TRUE(again.Open().ok());
  EXPECT_EQ(again.Delivering().size(), 2u);
  std::vector<std::vector<zmq::message_t>> replayed = again.Replay();
  ASSERT_EQ(replayed.size(), 3u);
  const std::vector<const std::vector<zmq::message_t>*> expected = {&progress, &big, &small};
  for (size_t m = 0; m < replayed.size(); ++m) {
    ASSERT_EQ(replayed[m].size(), expected[m]->size()) << "message " << m;
    for (size_t f = 0; f < replayed[m].size(); ++f) {
      EXPECT_EQ(replayed[m][f].to_string_view(), (*expected[m])[f].to_string_view())
          << "message " << m << " frame " << f;
    }
  }

  // Acknowledged attempts go; a message already read back stays readable (its file is unlinked,
  // not truncated, so the mapping it points into holds).
  again.Ack(a);
  EXPECT_EQ(replayed[1][2].to_string_view(), big[2].to_string_view());
  std::vector<std::vector<zmq::message_t>> rest = again.Replay();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0][1].to_string_view(), "done");
  again.Ack(b);
  EXPECT_TRUE(again.empty());
  EXPECT_TRUE(again.Replay().empty());
}

TEST_F(ResultSpoolTest, ATruncatedFileIsSkippedAndTheOthersStillReplay) {
  ResultSpool spool(dir_.string());
  ASSERT_TRUE(spool.Open().ok());
  ASSERT_TRUE(spool.Add({1, 1}, Message("frame", 200 * 1024), /*final=*/true).ok());
  ASSERT_TRUE(spool.Add({2, 1}, Message("done", 10), /*final=*/true).ok());
  int damaged = 0;
  for (const auto& file : fs::recursive_directory_iterator(dir_)) {
    if (file.path().extension() == ".msg" && file.file_size() > 100 * 1024) {
      fs::resize_file(file.path(), file.file_size() / 2);
      ++damaged;
    }
  }
  ASSERT_EQ(damaged, 1);
  std::vector<std::vector<zmq::message_t>> replayed = spool.Replay();
  ASSERT_EQ(replayed.size(), 1u);
  EXPECT_EQ(replayed[0][1].to_string_view(), "done");
}

}  // namespace
}  // namespace tessera::worker
