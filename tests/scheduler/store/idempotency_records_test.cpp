// Idempotency-Keys are kept for a day of the store's clock: found while younger than the age
// asked for, and forgotten (so the key may be used again) once a day has passed.

#include <gtest/gtest.h>

#include <chrono>

#include "tests/scheduler/store/store_fixture.h"

namespace tessera::store {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kDayMs = 24 * 3600 * 1000;

class IdempotencyRecordsTest : public StoreFixture {
 protected:
  IdempotencyRecordsTest() : StoreFixture("idempotency-records") {}

  static IdempotentRequest Request(const std::string& key, const std::string& hash) {
    IdempotentRequest r;
    r.user = "ana";
    r.key = key;
    r.request_hash = hash;
    r.resource = "api_token";
    r.resource_id = 7;
    return r;
  }
};
TSR_STORE_TEST_ON_BOTH_ENGINES(IdempotencyRecordsTest);

TEST_P(IdempotencyRecordsTest, ARequestIsFoundForADayOfTheClockAndThenForgotten) {
  IdempotencyRecords& keys = *store_;
  const int64_t made_at = clock_.WallMs();
  ASSERT_TRUE(keys.RecordIdempotentRequest(Request("k1", "first")).ok());
  EXPECT_EQ(keys.RecordIdempotentRequest(Request("k1", "again")).code(),
            StatusCode::kAlreadyExists);

  clock_.Advance(23h);
  auto found = keys.FindIdempotentRequest("ana", "k1", kDayMs);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_TRUE(found->has_value()) << "23 hours old: still kept";
  EXPECT_EQ((*found)->request_hash, "first");
  EXPECT_EQ((*found)->created_at_ms, made_at);
  EXPECT_FALSE(keys.FindIdempotentRequest("ana", "k1", 3600 * 1000)->has_value())
      << "older than the hour asked for";

  clock_.Advance(1h + 1ms);
  EXPECT_FALSE(keys.FindIdempotentRequest("ana", "k1", kDayMs)->has_value())
      << "a day old: no longer a retry";
  // The next record prunes keys older than a day: the key is free again.
  ASSERT_TRUE(keys.RecordIdempotentRequest(Request("k1", "a day later")).ok());
  EXPECT_EQ((*keys.FindIdempotentRequest("ana", "k1", kDayMs))->request_hash, "a day later");
}

TEST_P(IdempotencyRecordsTest, ASubmittedJobsKeyAgesOnTheSameClock) {
  spec::JobSpec spec;
  spec.name = "shot";
  spec.scene_yaml = "width: 8\n";
  spec.frame_start = spec.frame_end = 1;
  IdempotentRequest request = Request("job-key", "job");
  request.resource = "";
  auto job = store_->CreateJob(
      spec, "name: shot\n",
      [&](int64_t id) -> StatusOr<std::string> { return dir_ + "/out/" + std::to_string(id); },
      &request);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  auto found = store_->FindIdempotentRequest("ana", "job-key", kDayMs);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->resource, "job");
  EXPECT_EQ((*found)->resource_id, job->id);
  EXPECT_EQ((*found)->created_at_ms, clock_.WallMs());
  clock_.Advance(25h);
  EXPECT_FALSE(store_->FindIdempotentRequest("ana", "job-key", kDayMs)->has_value());
}

}  // namespace
}  // namespace tessera::store
