// A plugin job's settings and scene file name: resolved from its job file once, at submit, and
// stored on the job row (schema 28); jobs stored before get them from their job file when the
// database is migrated.

#include <gtest/gtest.h>

#include <string>

#include "scheduler/store/store.h"
#include "shared/jobs/job_file.h"
#include "tests/scheduler/store/store_fixture.h"

namespace tessera::store {
namespace {

constexpr const char* kPovJob =
    "name: pov\nrenderer: povray\nscene: shots/anim.pov\nframes: 1-2\n"
    "settings: {width: 64, antialias: true}\n";

class JobSettingsStoreTest : public StoreFixture {
 protected:
  JobSettingsStoreTest() : StoreFixture("job-settings") {}

  // Stores the job file as the API does: parsed, then stored with its text.
  JobRecord SubmitYaml(const std::string& yaml) {
    StatusOr<spec::JobSpec> spec = spec::ParseJobYaml(yaml);
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    if (!spec.ok()) return {};
    spec->scene_yaml = "#version 3.7;\n";
    auto job = store_->CreateJob(*spec, yaml, [&](int64_t id) -> StatusOr<std::string> {
      return dir_ + "/out/" + std::to_string(id);
    });
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? *job : JobRecord{};
  }

  static void ExpectPovSettings(const JobRecord& job) {
    EXPECT_EQ(job.settings.at("width"), "64") << "given";
    EXPECT_EQ(job.settings.at("antialias"), "true") << "given";
    EXPECT_EQ(job.settings.at("height"), "240") << "the plugin's default";
    EXPECT_EQ(job.scene_name, "anim.pov");
  }
};
TSR_STORE_TEST_ON_BOTH_ENGINES(JobSettingsStoreTest);

TEST_P(JobSettingsStoreTest, SubmitStoresTheResolvedSettingsAndSceneName) {
  const JobRecord submitted = SubmitYaml(kPovJob);
  ExpectPovSettings(submitted);
  // Read back without the job file: it no longer parses, and nothing parses it.
  Sql("UPDATE jobs SET job_yaml = 'renderer: [not, a, job' WHERE id = " +
      std::to_string(submitted.id));
  Reopen();
  ExpectPovSettings(*store_->GetJob(submitted.id));
  ExpectPovSettings(store_->ListJobs(std::nullopt, 10)->at(0));
  // A path-tracer job has neither.
  const JobRecord pt = Submit(1);
  EXPECT_TRUE(pt.settings.empty());
  EXPECT_EQ(pt.scene_name, "");
}

TEST_P(JobSettingsStoreTest, MigrationFromSchema27ResolvesEveryStoredPluginJobOnce) {
  TSR_SQLITE_ONLY();
  const int64_t good = SubmitYaml(kPovJob).id;
  const int64_t broken = SubmitYaml(kPovJob).id;
  const int64_t path_traced = Submit(1).id;
  store_.reset();
  // The file as schema 27 had it: no settings or scene name on the job rows; one job file no
  // longer parses.
  Sql(std::string(kBackToSchema28) +
      "ALTER TABLE jobs DROP COLUMN settings; ALTER TABLE jobs DROP COLUMN scene_name;"
      "UPDATE jobs SET job_yaml = 'renderer: [not, a, job' WHERE id = " +
      std::to_string(broken) + "; PRAGMA user_version = 27;");
  Reopen();
  EXPECT_EQ(store_->schema_version(), Store::kSchemaVersion);
  ExpectPovSettings(*store_->GetJob(good));
  // As when the broker parsed it at start-up: empty, and its tasks fail on the worker naming the
  // setting.
  const JobRecord b = *store_->GetJob(broken);
  EXPECT_TRUE(b.settings.empty());
  EXPECT_EQ(b.scene_name, "");
  EXPECT_EQ(b.renderer, "povray");
  EXPECT_TRUE(store_->GetJob(path_traced)->settings.empty());
  // Migrated once: opening again changes nothing.
  Reopen();
  ExpectPovSettings(*store_->GetJob(good));
}

// A job of a C++ plugin parses only against the declaration a worker offered, which the broker
// adopts only after the store has opened: the migration adopts the stored offers itself.
TEST_P(JobSettingsStoreTest, MigrationResolvesJobsOfACppPluginOfferedBefore) {
  TSR_SQLITE_ONLY();
  protocol::PluginOffer offer;
  offer.name = "ramp_backfill";  // registered nowhere else in this process
  offer.native = true;
  offer.description = "a ramp";
  offer.declaration =
      "scene:\n  extensions: [.ramp]\nsettings:\n"
      "  width: {type: int, min: 1, max: 64, default: 16, description: w}\n"
      "  height: {type: int, min: 1, max: 64, default: 8, description: h}\n";
  ASSERT_TRUE(store_->SaveNativePlugin(offer).ok());
  spec::JobSpec spec;
  spec.name = "r";
  spec.renderer = offer.name;
  spec.scene_path = "a.ramp";
  spec.frame_start = spec.frame_end = 1;
  const std::string yaml =
      "name: r\nrenderer: ramp_backfill\nscene: a.ramp\nframes: 1\nsettings: {width: 4}\n";
  auto job = store_->CreateJob(spec, yaml, [&](int64_t id) -> StatusOr<std::string> {
    return dir_ + "/out/" + std::to_string(id);
  });
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  store_.reset();
  Sql(std::string(kBackToSchema28) +
      "ALTER TABLE jobs DROP COLUMN settings; ALTER TABLE jobs DROP COLUMN scene_name;"
      "PRAGMA user_version = 27;");
  Reopen();
  const JobRecord migrated = *store_->GetJob(job->id);
  EXPECT_EQ(migrated.settings.count("width") ? migrated.settings.at("width") : "", "4");
  EXPECT_EQ(migrated.settings.count("height") ? migrated.settings.at("height") : "", "8");
  EXPECT_EQ(migrated.scene_name, "a.ramp");
}

}  // namespace
}  // namespace tessera::store
