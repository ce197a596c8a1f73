// Checkpoints on their own: a path tracer's checkpoint is checked against the task's frame and
// samples before it is kept as a blob; a newer one replaces it (and the older blob goes); one
// from an attempt that is no longer the lease changes nothing; clearing the resume point
// deletes its blob.

#include "scheduler/broker/checkpoints.h"

#include "scheduler/blobs/blob_store.h"
#include "shared/images/accumulation.h"
#include "tests/scheduler/broker/parts_fixture.h"

namespace tessera::broker {
namespace {

class CheckpointsTest : public BrokerPartsTest {
 protected:
  void SetUp() override {
    BrokerPartsTest::SetUp();
    blobs_ = std::make_unique<blobs::BlobStore>(dir_ + "/blobs");
    ASSERT_TRUE(blobs_->Open().ok());
    options_.blobs = blobs_.get();
    Build();
    spec::JobSpec spec;
    spec.name = "shot";
    spec.renderer = spec::kRendererPathTracer;
    spec.scene_yaml = "width: 4\nheight: 2\n";
    spec.frame_start = 1;
    spec.frame_end = 2;
    spec.chunk_size = 2;
    job_ = StoreJob(spec);
    Register("w1");
    parts_->dispatch.Run(*pass_);
    task_id_ = TaskIds(job_).at(0);
  }

  // A checkpoint of `frame` holding `samples` samples of the whole 4x2 frame.
  static zmq::message_t Accumulation(int frame, int samples) {
    accumulation::RenderedImage image;
    image.width = image.frame_width = 4;
    image.height = image.frame_height = 2;
    image.channels = 4;
    image.channel_names = {"R", "G", "B", "A"};
    image.frame = frame;
    image.sample_count = samples;
    image.sums.assign(4 * 2 * 4, int64_t{samples});
    image.pixels.assign(4 * 2 * 4, 1.0f);
    StatusOr<std::string> bytes = accumulation::SerializeAccumulation(image);
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    return zmq::message_t(bytes->data(), bytes->size());
  }
  protocol::Envelope CheckpointOf(int attempt, int frame, int samples) {
    protocol::Checkpoint m;
    m.task_id = task_id_;
    m.attempt = attempt;
    m.frame = frame;
    m.samples_done = samples;
    return Message(protocol::MessageType::kCheckpoint, m, Accumulation(frame, samples));
  }

  std::unique_ptr<blobs::BlobStore> blobs_;
  int64_t job_ = 0;
  int64_t task_id_ = 0;
};

TEST_F(CheckpointsTest, NewerCheckpointReplacesTheOneKeptAndClearingDeletesIt) {
  const WorkerConn& worker = *parts_->workers.Find("w1");
  protocol::Envelope first = CheckpointOf(1, 1, 16);
  parts_->checkpoints.OnCheckpoint(*pass_, "w1", worker, first);
  LiveTask& task = parts_->table.tasks().at(task_id_);
  ASSERT_FALSE(task.checkpoint_hash.empty());
  const std::string kept = task.checkpoint_hash;
  EXPECT_EQ(task.checkpoint_samples, 16);
  EXPECT_EQ(task.resume_frame, 1);
  EXPECT_EQ(counters_.Read().checkpoints_kept, 1u);

  protocol::Envelope behind = CheckpointOf(1, 1, 8);  // fewer samples: not kept
  parts_->checkpoints.OnCheckpoint(*pass_, "w1", worker, behind);
  EXPECT_EQ(task.checkpoint_hash, kept);

  protocol::Envelope newer = CheckpointOf(1, 2, 4);  // a later frame
  parts_->checkpoints.OnCheckpoint(*pass_, "w1", worker, newer);
  EXPECT_NE(task.checkpoint_hash, kept);
  EXPECT_EQ(task.resume_frame, 2);
  EXPECT_FALSE(blobs_->Size(kept).ok());  // the older blob is gone

  const std::string newest = task.checkpoint_hash;
  parts_->checkpoints.Clear(task);
  EXPECT_TRUE(task.checkpoint_hash.empty());
  EXPECT_EQ(task.resume_frame, 0);
  EXPECT_FALSE(blobs_->Size(newest).ok());
}

TEST_F(CheckpointsTest, CheckpointOfAnAttemptThatIsNoLongerTheLeaseChangesNothing) {
  protocol::Envelope stale = CheckpointOf(7, 1, 16);
  parts_->checkpoints.OnCheckpoint(*pass_, "w1", *parts_->workers.Find("w1"), stale);
  EXPECT_TRUE(parts_->table.tasks().at(task_id_).checkpoint_hash.empty());
  EXPECT_EQ(counters_.Read().checkpoints_kept, 0u);
}

TEST_F(CheckpointsTest, CheckpointOfAnotherFrameOrSampleCountIsRefused) {
  LiveTask& task = parts_->table.tasks().at(task_id_);
  EXPECT_EQ(parts_->checkpoints.Keep(task, 1, 3, 16, Accumulation(3, 16)),
            "frame 3 is not the task's");
  EXPECT_EQ(parts_->checkpoints.Keep(task, 1, 1, 16, Accumulation(2, 16)),
            "it is not of the task's frame, region and samples");
  EXPECT_EQ(parts_->checkpoints.Keep(task, 1, 1, 32, Accumulation(1, 16)),
            "it holds 16 samples, not the 32 its message says");
  EXPECT_TRUE(task.checkpoint_hash.empty());
  EXPECT_TRUE(Checkpoints::Resumes(task, /*count_failure=*/false) == false);
  EXPECT_TRUE(parts_->checkpoints.Keep(task, 1, 1, 16, Accumulation(1, 16)).empty());
  EXPECT_TRUE(Checkpoints::Resumes(task, /*count_failure=*/false));
  EXPECT_FALSE(Checkpoints::Resumes(task, /*count_failure=*/true));
}

}  // namespace
}  // namespace tessera::broker
