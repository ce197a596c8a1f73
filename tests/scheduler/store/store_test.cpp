#include "scheduler/store/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <future>
#include <limits>

#include "scheduler/api/views.h"
#include "scheduler/assembler/assembler.h"
#include "shared/images/image_io.h"
#include "tests/scheduler/store/store_fixture.h"
#include "tests/support/require.h"
#include "tests/support/tmpfs.h"

namespace tessera::store {
namespace {

namespace fs = std::filesystem;

class StoreTest : public StoreFixture {
 protected:
  StoreTest() : StoreFixture("store") {}
};
TSR_STORE_TEST_ON_BOTH_ENGINES(StoreTest);

TEST_P(StoreTest, MigratesToCurrentSchemaAndReopens) {
  TSR_SQLITE_ONLY();
  EXPECT_EQ(store_->schema_version(), Store::kSchemaVersion);
  Submit(3);
  store_.reset();
  auto again = Store::Open(dir_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->schema_version(), Store::kSchemaVersion);
  EXPECT_EQ((*again)->ListJobs(std::nullopt, 10)->size(), 1u);

  // WAL mode and user_version are really set on the file.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/tessera.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST_P(StoreTest, RefusesDatabaseFromNewerVersion) {
  TSR_SQLITE_ONLY();
  store_.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/tessera.db").c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto s = Store::Open(dir_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("newer"), std::string::npos);
}

TEST_P(StoreTest, CreatesJobAndTasksTogether) {
  JobRecord job = Submit(10, 4);
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_EQ(job.tasks.total, 3);
  EXPECT_EQ(job.tasks.queued, 3);
  EXPECT_EQ(job.output_dir, dir_ + "/out/" + std::to_string(job.id));
  EXPECT_EQ(job.output_pattern, "shot.####");
  auto tasks = store_->ListTasks(job.id);
  ASSERT_TRUE(tasks.ok());
  ASSERT_EQ(tasks->size(), 3u);
  EXPECT_EQ((*tasks)[2].frame_start, 9);
  EXPECT_EQ((*tasks)[2].frame_end, 10);
  EXPECT_EQ(*store_->JobScene(job.id), "width: 8\n");
}

TEST_P(StoreTest, FailedOutputDirectoryStoresNothing) {
  spec::JobSpec spec;
  spec.name = "x";
  spec.scene_yaml = "w";
  spec.frame_start = spec.frame_end = 1;
  auto job = store_->CreateJob(spec, "", [](int64_t) -> StatusOr<std::string> {
    return Status::InvalidArgument("output.directory: nope");
  });
  ASSERT_FALSE(job.ok());
  EXPECT_TRUE(store_->ListJobs(std::nullopt, 10)->empty());
  EXPECT_EQ(store_->Summary()->tasks.total, 0);
}

// A data folder with no room left: the store's writes fail as kStorageFull naming the folder and
// the room on it (what the broker turns read-only on), not as an internal error; nothing of the
// failed write is stored, and writes work again once room is back.
TEST(StoreFull, WritesFailAsStorageFullNamingTheDataFolder) {
  TSR_REQUIRE(::geteuid() == 0, "mounting a tmpfs needs root");
  const std::string dir =
      (fs::path(::testing::TempDir()) / ("store-full-" + std::to_string(::getpid())))
          .lexically_normal()
          .string();
  testing::ScopedTmpfs tmpfs(dir, 8 << 20);
  ASSERT_TRUE(tmpfs.mounted()) << tmpfs.error();
  auto opened = Store::Open(dir);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Store> store = std::move(*opened);
  EXPECT_EQ(store->data_dir(), dir);
  spec::JobSpec spec;
  spec.name = "big";
  spec.scene_yaml = "width: 8\n";
  spec.frame_start = 1;
  spec.frame_end = 20000;  // megabytes of rows: more than the folder has left
  tmpfs.Fill();
  auto job = store->CreateJob(spec, "name: big\n", [&](int64_t id) -> StatusOr<std::string> {
    return dir + "/out-" + std::to_string(id);
  });
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kStorageFull) << job.status().ToString();
  EXPECT_NE(job.status().message().find("the data folder " + dir), std::string::npos)
      << job.status().message();
  EXPECT_NE(job.status().message().find(" free of "), std::string::npos) << job.status().message();
  EXPECT_TRUE(store->ListJobs(std::nullopt, 10)->empty());
  tmpfs.FreeFiller();
  spec.frame_end = 10;
  job = store->CreateJob(spec, "name: big\n", [&](int64_t id) -> StatusOr<std::string> {
    return dir + "/out-" + std::to_string(id);
  });
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  store.reset();
}

TEST(OutputValidation, PixelProblemFindsNonFiniteValuesAndBlackBeauty) {
  EXPECT_EQ(assembler::PixelProblem({0.1f, 0.2f, 0.3f, 1.0f}, 4), "");
  EXPECT_EQ(assembler::PixelProblem({0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 1.0f}, 4),
            "the image is entirely black")
      << "alpha alone does not light a pixel";
  EXPECT_EQ(assembler::PixelProblem({0.1f, std::numeric_limits<float>::infinity(), 0.3f, 1.0f,
                                     std::nanf(""), 0.0f, 0.0f, 1.0f},
                                    4),
            "2 NaN or infinite values");
}

TEST_P(StoreTest, TaskLifecycleKeepsCountersAndFencesStaleAttempts) {
  JobRecord job = Submit(2);
  int64_t w = Worker("w1");
  auto tasks = *store_->ListTasks(job.id);
  int64_t t0 = tasks[0].id, t1 = tasks[1].id;

  ASSERT_TRUE(store_->StartTask(t0, 1, w).ok());
  EXPECT_FALSE(store_->StartTask(t0, 1, w).ok()) << "a running task cannot be leased twice";
  EXPECT_EQ(store_->GetJob(job.id)->state, JobState::kRunning);
  EXPECT_EQ(store_->GetJob(job.id)->tasks.running, 1);

  // Worker lost: requeued without charging the retry budget; attempt 1 is now stale.
  ASSERT_TRUE(store_->RequeueTask(t0, 1, "worker lost", false).ok());
  EXPECT_EQ(store_->GetTask(t0)->failures, 0);
  ASSERT_TRUE(store_->StartTask(t0, 2, w).ok());
  Status stale = store_->FinishTask(t0, 1, w);
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store_->SetTaskProgress(t0, 2, 0.5).ok());
  EXPECT_DOUBLE_EQ(store_->GetTask(t0)->progress, 0.5);
  ASSERT_TRUE(store_->FinishTask(t0, 2, w).ok());
  EXPECT_EQ(store_->GetTask(t0)->state, TaskState::kDone);
  EXPECT_EQ(store_->GetTask(t0)->worker_name, "w1");

  ASSERT_TRUE(store_->StartTask(t1, 1, w).ok());
  ASSERT_TRUE(store_->FailTask(t1, 1, "out of memory").ok());
  JobRecord after = *store_->GetJob(job.id);
  EXPECT_EQ(after.state, JobState::kFailed);
  EXPECT_EQ(after.tasks.done, 1);
  EXPECT_EQ(after.tasks.failed, 1);
  EXPECT_EQ(after.tasks.running + after.tasks.queued, 0);
  ASSERT_TRUE(after.error.has_value());
  EXPECT_NE(after.error->find("out of memory"), std::string::npos);
  EXPECT_TRUE(after.finished_at_ms.has_value());
}

TEST_P(StoreTest, WriteGroupShowsItsWritesToItsThreadAndStoresThemOnlyOnCommit) {
  JobRecord job = Submit(2);
  int64_t w = Worker("w1");
  auto tasks = *store_->ListTasks(job.id);
  int64_t t0 = tasks[0].id, t1 = tasks[1].id;
  auto running_elsewhere = [&] {
    return std::async(std::launch::async, [&] { return store_->GetJob(job.id)->tasks.running; })
        .get();
  };
  {
    Store::WriteGroup group(*store_);
    ASSERT_TRUE(store_->StartTask(t0, 1, w).ok());
    EXPECT_EQ(store_->GetJob(job.id)->tasks.running, 1) << "the group's thread sees its write";
    EXPECT_EQ(running_elsewhere(), 0) << "other threads see only what is committed";
  }  // not committed: rolled back
  EXPECT_EQ(store_->GetTask(t0)->state, TaskState::kQueued);
  EXPECT_EQ(store_->GetJob(job.id)->tasks.running, 0);

  {
    Store::WriteGroup group(*store_);
    ASSERT_TRUE(store_->StartTask(t0, 1, w).ok());
    ASSERT_TRUE(store_->FinishTask(t0, 1, w).ok());
    ASSERT_TRUE(store_->StartTask(t1, 1, w).ok());
    ASSERT_TRUE(store_->SetWorkerState(w, WorkerState::kBusy).ok());
    ASSERT_TRUE(group.Commit().ok());
  }
  JobRecord j = *store_->GetJob(job.id);
  EXPECT_EQ(j.tasks.done, 1);
  EXPECT_EQ(j.tasks.running, 1);
  EXPECT_EQ(j.tasks.queued, 0);
  EXPECT_EQ(j.state, JobState::kRunning);
  EXPECT_EQ(store_->ListWorkers()->at(0).state, WorkerState::kBusy);

  {
    // A recorded write the fencing refuses is skipped; the rest of the group commits.
    Store::WriteGroup group(*store_);
    ASSERT_TRUE(store_->FinishTask(t0, 1, w).ok());
    ASSERT_TRUE(store_->FinishTask(t1, 1, w).ok());
    ASSERT_TRUE(group.Commit().ok());
  }
  j = *store_->GetJob(job.id);
  EXPECT_EQ(j.tasks.done, 2) << "t0 was not counted twice";
  EXPECT_EQ(j.state, JobState::kDone);
}

TEST_P(StoreTest, BackupCopyRunsBesideTheOriginalAndEitherMayFinish) {
  JobRecord job = Submit(2);
  int64_t w1 = Worker("w1"), w2 = Worker("w2");
  auto tasks = *store_->ListTasks(job.id);
  int64_t t0 = tasks[0].id, t1 = tasks[1].id;
  ASSERT_TRUE(store_->StartTask(t0, 1, w1).ok());
  EXPECT_FALSE(store_->StartBackup(t1, 1).ok()) << "only a running task gets a backup";
  ASSERT_TRUE(store_->StartBackup(t0, 2).ok());
  EXPECT_FALSE(store_->StartBackup(t0, 2).ok()) << "attempt numbers are never reused";
  EXPECT_EQ(store_->GetJob(job.id)->tasks.running, 1) << "a backup is not a second task";
  // The original wins the race: the backup's attempt is fenced off from then on.
  ASSERT_TRUE(store_->FinishTask(t0, 1, w1).ok());
  EXPECT_FALSE(store_->FinishTask(t0, 2, w2).ok()) << "no task is recorded done twice";
  EXPECT_EQ(store_->GetTask(t0)->attempt, 2);
  EXPECT_EQ(store_->GetTask(t0)->worker_name, "w1");

  // The original fails while its backup runs on: only that copy ends; the backup finishes.
  ASSERT_TRUE(store_->StartTask(t1, 1, w1).ok());
  ASSERT_TRUE(store_->StartBackup(t1, 2).ok());
  ASSERT_TRUE(store_->EndCopy(t1, 1, /*count_failure=*/true).ok());
  EXPECT_EQ(store_->GetTask(t1)->failures, 1);
  EXPECT_FALSE(store_->EndCopy(t1, 2, false).ok()) << "the last copy ends by requeue or finish";
  EXPECT_FALSE(store_->FinishTask(t1, 1, w1).ok()) << "the dropped copy is stale";
  ASSERT_TRUE(store_->FinishTask(t1, 2, w2).ok());
  EXPECT_EQ(store_->GetTask(t1)->worker_name, "w2");
  EXPECT_EQ(store_->GetJob(job.id)->state, JobState::kDone);
  EXPECT_EQ(store_->GetJob(job.id)->tasks.done, 2);
}

TEST_P(StoreTest, RestartRequeuesRunningTasks) {
  JobRecord job = Submit(3);
  int64_t w = Worker("w1");
  auto tasks = *store_->ListTasks(job.id);
  ASSERT_TRUE(store_->StartTask(tasks[0].id, 1, w).ok());
  ASSERT_TRUE(store_->StartTask(tasks[1].id, 1, w).ok());
  ASSERT_TRUE(store_->FinishTask(tasks[1].id, 1, w).ok());
  Reopen();
  auto unfinished = store_->LoadUnfinishedTasks(std::nullopt);
  ASSERT_TRUE(unfinished.ok());
  ASSERT_EQ(unfinished->size(), 2u);
  for (const TaskRecord& t : *unfinished) EXPECT_EQ(t.state, TaskState::kQueued);
  EXPECT_EQ((*unfinished)[0].attempt, 1) << "the next lease is attempt 2, fencing the old one";
  JobRecord j = *store_->GetJob(job.id);
  EXPECT_EQ(j.tasks.queued, 2);
  EXPECT_EQ(j.tasks.running, 0);
  EXPECT_EQ(j.tasks.done, 1);
}

TEST_P(StoreTest, CancelReturnsRunningLeases) {
  JobRecord job = Submit(4);
  int64_t w = Worker("w1");
  auto tasks = *store_->ListTasks(job.id);
  ASSERT_TRUE(store_->StartTask(tasks[0].id, 1, w).ok());
  auto leases = store_->CancelJob(job.id);
  ASSERT_TRUE(leases.ok());
  ASSERT_EQ(leases->size(), 1u);
  EXPECT_EQ((*leases)[0].task_id, tasks[0].id);
  EXPECT_EQ((*leases)[0].worker_id, w);
  JobRecord j = *store_->GetJob(job.id);
  EXPECT_EQ(j.state, JobState::kCanceled);
  EXPECT_EQ(j.tasks.canceled, 4);
  EXPECT_EQ(store_->CancelJob(job.id).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->CancelJob(999).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(store_->FinishTask(tasks[0].id, 1, w).ok()) << "a canceled lease cannot complete";
}

TEST_P(StoreTest, WorkersUpsertByNameAndSummaryCounts) {
  int64_t a = Worker("a");
  int64_t b = Worker("b");
  EXPECT_EQ(Worker("a"), a) << "re-registration keeps the worker's id";
  ASSERT_TRUE(store_->SetWorkerState(b, WorkerState::kOffline).ok());
  Submit(5);
  auto sum = store_->Summary();
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->tasks.total, 5);
  EXPECT_EQ(sum->tasks.queued, 5);
  auto workers = *store_->ListWorkers();
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers[0].state, WorkerState::kIdle);
  EXPECT_EQ(workers[1].state, WorkerState::kOffline);
  EXPECT_EQ(workers[0].backends, (std::vector<std::string>{"cpu"}));
}

TEST_P(StoreTest, WorkerMachineAndCloudDetailsAreStoredAndServed) {
  int64_t plain = Worker("on-prem");
  protocol::Register reg;
  reg.name = "spot-1";
  reg.os = "Debian GNU/Linux 12 (bookworm), Linux 6.1.0-18-amd64 x86_64";
  reg.cpu_model = "AMD EPYC 7R32";
  reg.cloud = {"aws", "us-east-1", "us-east-1a", "g5.xlarge", "spot"};
  reg.gpus = {{0, "NVIDIA A10G", 22731, 8, 6, "12.4", "12.2"}};
  ASSERT_TRUE(store_->UpsertWorker(reg).ok());

  auto workers = *store_->ListWorkers();
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers[0].id, plain);
  EXPECT_EQ(workers[0].os, "") << "a worker that reports nothing has empty details";
  EXPECT_EQ(workers[0].cloud.provider, "");
  const WorkerRecord& spot = workers[1];
  EXPECT_EQ(spot.os, reg.os);
  EXPECT_EQ(spot.cpu_model, "AMD EPYC 7R32");
  EXPECT_EQ(spot.cloud.instance_type, "g5.xlarge");
  EXPECT_EQ(spot.cloud.lifecycle, "spot");
  ASSERT_EQ(spot.gpus.size(), 1u);
  EXPECT_EQ(spot.gpus[0].driver_version, "12.4");

  const nlohmann::json view = api::WorkerView(spot);
  EXPECT_EQ(view["os"], reg.os);
  EXPECT_EQ(view["cpu_model"], "AMD EPYC 7R32");
  EXPECT_EQ(view["cloud"]["provider"], "aws");
  EXPECT_EQ(view["cloud"]["zone"], "us-east-1a");
  EXPECT_EQ(view["gpus"][0]["runtime_version"], "12.2");

  // Re-registering replaces the details (the machine may have been rebuilt).
  reg.cloud = {};
  reg.os = "Ubuntu 24.04 LTS, Linux 6.8.0 x86_64";
  ASSERT_TRUE(store_->UpsertWorker(reg).ok());
  workers = *store_->ListWorkers();
  EXPECT_EQ(workers[1].os, "Ubuntu 24.04 LTS, Linux 6.8.0 x86_64");
  EXPECT_EQ(workers[1].cloud.provider, "");
}

// ---- credentials: a worker name never changes hands silently ----------------------------------

TEST_P(StoreTest, EnrolmentNeverTakesOverANameEnrolledWithAnotherKey) {
  auto token = store_->CreateJoinToken("token-key", "any name", std::nullopt, 0);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  ASSERT_TRUE(store_->EnrolWorker("render-1", "key-a", token->id).ok());
  // The same machine again (its ENROLLED answer was lost): fine.
  auto again = store_->EnrolWorker("render-1", "key-a", token->id);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->replaced_key);

  // Anyone else holding a join token: refused, and the enrolled key stays.
  auto thief = store_->EnrolWorker("render-1", "key-b", token->id);
  ASSERT_FALSE(thief.ok());
  EXPECT_EQ(thief.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(thief.status().message().find("already enrolled with another key"), std::string::npos)
      << thief.status().message();
  auto keys = store_->ListWorkerKeys();
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].public_key, "key-a");

  // Revoked: still refused until an operator readmits the name...
  ASSERT_TRUE(store_->SetWorkerRevoked("render-1", true).ok());
  auto revoked = store_->EnrolWorker("render-1", "key-b", token->id);
  ASSERT_FALSE(revoked.ok());
  EXPECT_EQ(revoked.status().code(), StatusCode::kFailedPrecondition);
  // ...which forgets the old key for good (it must not come back with a restart)...
  ASSERT_TRUE(store_->SetWorkerRevoked("render-1", false).ok());
  EXPECT_TRUE(store_->ListWorkerKeys()->empty());
  // ...and then another machine may enrol under it.
  auto replacement = store_->EnrolWorker("render-1", "key-b", token->id);
  ASSERT_TRUE(replacement.ok()) << replacement.status().ToString();
  EXPECT_EQ((*store_->ListWorkerKeys())[0].public_key, "key-b");
  // Readmitting a worker that is not revoked changes nothing; an unknown one is NotFound.
  ASSERT_TRUE(store_->SetWorkerRevoked("render-1", false).ok());
  EXPECT_EQ(store_->ListWorkerKeys()->size(), 1u);
  EXPECT_EQ(store_->SetWorkerRevoked("nobody", false).status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, AJoinTokenMadeForANameMayReplaceItsKeyAndEnrolsNothingElse) {
  auto any = store_->CreateJoinToken("any-key", "", std::nullopt, 0);
  ASSERT_TRUE(any.ok());
  ASSERT_TRUE(store_->EnrolWorker("render-1", "key-a", any->id).ok());
  auto named = store_->CreateJoinToken("named-key", "new disk", std::nullopt, 1, "render-1");
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(named->worker_name, "render-1");
  EXPECT_EQ((*store_->ListJoinTokens())[1].worker_name, "render-1");

  auto other = store_->EnrolWorker("render-2", "key-c", named->id);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("made for worker render-1"), std::string::npos)
      << other.status().message();
  auto replaced = store_->EnrolWorker("render-1", "key-b", named->id);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  ASSERT_TRUE(replaced->replaced_key);
  EXPECT_EQ(*replaced->replaced_key, "key-a");
  EXPECT_FALSE(replaced->token_usable) << "it had one use";
}

TEST_P(StoreTest, RevokingATokenKeepsItsFirstRevocationAndNamesAMissingOne) {
  auto join = store_->CreateJoinToken("token-key", "note", std::nullopt, 0);
  ASSERT_TRUE(join.ok()) << join.status().ToString();
  auto first = store_->RevokeJoinToken(join->id);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(first->revoked_at_ms.has_value());
  EXPECT_EQ(first->public_key, "token-key");  // the row as stored, read back by RETURNING
  auto again = store_->RevokeJoinToken(join->id);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->revoked_at_ms, first->revoked_at_ms);
  EXPECT_EQ(store_->ListJoinTokens()->at(0).revoked_at_ms, first->revoked_at_ms);
  auto missing = store_->RevokeJoinToken(join->id + 100);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "join token " + std::to_string(join->id + 100) + " does not exist");

  store::ApiTokenRecord rec;
  rec.secret_hash = "hash";
  rec.user = "ana";
  rec.role = "submitter";
  auto api = store_->CreateApiToken(rec);
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  EXPECT_EQ(api->user, "ana");
  auto revoked = store_->RevokeApiToken(api->id);
  ASSERT_TRUE(revoked.ok());
  EXPECT_TRUE(revoked->revoked_at_ms.has_value());
  EXPECT_EQ(store_->RevokeApiToken(api->id + 7).status().message(),
            "API token " + std::to_string(api->id + 7) + " does not exist");
}

TEST_P(StoreTest, TheDatabaseAndItsJournalsAreTheSchedulersUsersAlone) {
  TSR_SQLITE_ONLY();
  Submit(2);  // writes: the -wal and -shm files exist
  const std::string db = dir_ + "/tessera.db";
  auto mode = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 0777) : -1;
  };
  EXPECT_EQ(mode(db), 0600);
  EXPECT_EQ(mode(db + "-wal"), 0600);
  EXPECT_EQ(mode(db + "-shm"), 0600);
  // A database an older version left readable by everyone is made private when it opens.
  store_.reset();
  ASSERT_EQ(::chmod(db.c_str(), 0644), 0);
  auto reopened = Store::Open(dir_);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(mode(db), 0600);
}

TEST(AssemblerTest, WritesEveryRequestedFormatWithPaddedNames) {
  assembler::FrameJob job;
  job.frame = 7;
  job.output = {::testing::TempDir() + "/assembled/sub", "beauty.####", {"exr", "png"}};
  job.image = {2, 2, 4, std::vector<float>(16, 0.5f)};
  assembler::FrameWritten w = assembler::Assembler::WriteFrame(job);
  ASSERT_TRUE(w.status.ok()) << w.status.ToString();
  ASSERT_EQ(w.files.size(), 2u);
  EXPECT_TRUE(fs::exists(job.output.dir + "/beauty.0007.exr"));
  EXPECT_TRUE(fs::exists(job.output.dir + "/beauty.0007.png"));
  auto back = image::Read(job.output.dir + "/beauty.0007.exr");
  ASSERT_TRUE(back.ok());
  EXPECT_FLOAT_EQ(back->pixels[0], 0.5f);
}

TEST_P(StoreTest, AWebhookCursorStartsAtTheLatestEventAndMovesOnlyWhenSet) {
  Submit(1);  // the job's submission is an event
  const StatusOr<int64_t> first = store_->WebhookCursor("http://127.0.0.1:9/hook");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_GT(*first, 0) << "a new receiver starts after the events already logged";
  Submit(1);
  EXPECT_EQ(*store_->WebhookCursor("http://127.0.0.1:9/hook"), *first) << "kept, not moved";
  ASSERT_TRUE(store_->SetWebhookCursor("http://127.0.0.1:9/hook", *first + 1).ok());
  Reopen();
  EXPECT_EQ(*store_->WebhookCursor("http://127.0.0.1:9/hook"), *first + 1);
}

TEST_P(StoreTest, ReadsRecoverWhenTheServerEndsTheReadersConnections) {
  if (!postgres()) GTEST_SKIP() << "PostgreSQL's: SQLite's readers are files";
  const JobRecord job = Submit(2);
  ASSERT_TRUE(store_->GetJob(job.id).ok());  // a reader connection is now pooled
  // The server ends the readers' connections (a restart, an administrator's
  // pg_terminate_backend); the writer's, named after its scheduler, stays.
  const StatusOr<std::string> ended =
      pg_->Query("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '" +
                 database_ + "' AND application_name = 'tessera-scheduler'");
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  ASSERT_NE(*ended, "0") << "no reader connection was open";
  // The lost connection may fail one read; it is not lent again.
  (void)store_->GetJob(job.id);
  for (int i = 0; i < 3; ++i) {
    const StatusOr<JobRecord> again = store_->GetJob(job.id);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->tasks.total, 2);
  }
}

}  // namespace
}  // namespace tessera::store
