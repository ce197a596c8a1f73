// Bulk transfers on their own: large results reassembled from pieces within the memory budget, and
// blob pieces served (or refused with a reason), without a socket or a broker.

#include "scheduler/broker/bulk_transfers.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "scheduler/blobs/blob_store.h"

namespace tessera::broker {
namespace {

using protocol::Piece;

zmq::message_t Bytes(const std::string& s) { return zmq::message_t(s.data(), s.size()); }

// The original message's header and body (a real frame result's), which ride on the last
// piece: the receiver checks the header is one.
std::vector<zmq::message_t> HeaderAndBody() {
  std::vector<zmq::message_t> frames =
      protocol::Encode(protocol::MessageType::kFrameResult, protocol::FrameResult{});
  frames.resize(2);
  return frames;
}

TEST(BulkTransfersTest, ResultArrivesWholeAfterItsLastPiece) {
  BulkTransfers transfers(nullptr, 1 << 20);
  auto first = transfers.AddPiece("w1", Piece{7, 0, 10}, Bytes("01234"), {});
  EXPECT_FALSE(first.message.has_value());
  EXPECT_EQ(first.ack.transfer, 7u);
  EXPECT_EQ(first.ack.received, 5);
  EXPECT_TRUE(first.ack.error.empty());
  EXPECT_EQ(transfers.buffered_bytes(), 10);  // the whole result is reserved at its first piece

  auto last = transfers.AddPiece("w1", Piece{7, 5, 10}, Bytes("56789"), HeaderAndBody());
  ASSERT_TRUE(last.message.has_value());
  ASSERT_EQ(last.message->size(), 3u);
  const std::vector<zmq::message_t> sent = HeaderAndBody();
  EXPECT_EQ((*last.message)[0].to_string(), sent[0].to_string());
  EXPECT_EQ((*last.message)[1].to_string(), sent[1].to_string());
  EXPECT_EQ((*last.message)[2].to_string(), "0123456789");
  EXPECT_EQ(last.ack.received, 10);
  EXPECT_EQ(transfers.buffered_bytes(), 0);
}

TEST(BulkTransfersTest, BudgetIsSharedByAllWorkersAndFreedWhenOneLeaves) {
  BulkTransfers transfers(nullptr, 16);
  auto a = transfers.AddPiece("w1", Piece{1, 0, 12}, Bytes("abcd"), {});
  EXPECT_EQ(a.ack.retry_after_ms, 0);
  // A second worker's result does not fit beside the first: not now.
  auto b = transfers.AddPiece("w2", Piece{1, 0, 12}, Bytes("abcd"), {});
  EXPECT_GT(b.ack.retry_after_ms, 0);
  EXPECT_FALSE(b.message.has_value());
  // The first worker left: its partial result is dropped, and the second one fits.
  transfers.DropPeer("w1");
  EXPECT_EQ(transfers.buffered_bytes(), 0);
  auto again = transfers.AddPiece("w2", Piece{2, 0, 12}, Bytes("abcd"), {});
  EXPECT_EQ(again.ack.retry_after_ms, 0);
  EXPECT_TRUE(again.ack.error.empty());
}

TEST(BulkTransfersTest, OutOfOrderPieceStartsTheTransferOverAndABadOneIsRefused) {
  BulkTransfers transfers(nullptr, 1 << 20);
  (void)transfers.AddPiece("w1", Piece{3, 0, 10}, Bytes("01234"), {});
  auto skipped = transfers.AddPiece("w1", Piece{3, 7, 10}, Bytes("789"), HeaderAndBody());
  EXPECT_GT(skipped.ack.retry_after_ms, 0);
  EXPECT_FALSE(skipped.message.has_value());
  EXPECT_EQ(transfers.buffered_bytes(), 0);
  // A piece beyond the payload it claims to be part of is refused for good.
  auto bad = transfers.AddPiece("w1", Piece{4, 8, 10}, Bytes("89abc"), {});
  EXPECT_FALSE(bad.ack.error.empty());
}

class BulkTransfersBlobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/transfers-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    blobs_ = std::make_unique<blobs::BlobStore>(dir_);
    ASSERT_TRUE(blobs_->Open().ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  std::unique_ptr<blobs::BlobStore> blobs_;
};

TEST_F(BulkTransfersBlobTest, ServesThePieceAskedFor) {
  StatusOr<std::string> hash = blobs_->Put("texture bytes");
  ASSERT_TRUE(hash.ok()) << hash.status().ToString();
  BulkTransfers transfers(blobs_.get(), 1 << 20);
  BulkTransfers::BlobPiece piece = transfers.ServeBlob({*hash, 8, 100});
  EXPECT_TRUE(piece.data.error.empty()) << piece.data.error;
  EXPECT_EQ(piece.data.hash, *hash);
  EXPECT_EQ(piece.data.offset, 8);
  EXPECT_EQ(piece.data.total, 13);
  EXPECT_EQ(piece.payload.to_string(), "bytes");
}

TEST_F(BulkTransfersBlobTest, RefusesWithAReason) {
  StatusOr<std::string> hash = blobs_->Put("texture bytes");
  ASSERT_TRUE(hash.ok());
  BulkTransfers transfers(blobs_.get(), 1 << 20);
  EXPECT_EQ(transfers.ServeBlob({"not-a-hash", 0, 10}).data.error,
            "hash: not 64 lowercase hex digits");
  EXPECT_NE(transfers.ServeBlob({*hash, 0, 0}).data.error, "");
  EXPECT_NE(transfers.ServeBlob({*hash, -1, 10}).data.error, "");
  EXPECT_NE(transfers.ServeBlob({*hash, 0, protocol::kPieceBytes + 1}).data.error, "");
  // Unknown blob: no payload, the store's reason.
  BulkTransfers::BlobPiece unknown = transfers.ServeBlob({std::string(64, 'a'), 0, 10});
  EXPECT_NE(unknown.data.error, "");
  EXPECT_EQ(unknown.payload.size(), 0u);
  // A scheduler without blobs says so.
  BulkTransfers none(nullptr, 1 << 20);
  EXPECT_EQ(none.ServeBlob({*hash, 0, 10}).data.error, "this scheduler keeps no blobs");
}

}  // namespace
}  // namespace tessera::broker
