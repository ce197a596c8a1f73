// A real farm whose records live on a real PostgreSQL (store.url): the scheduler renders a job
// with real workers, is killed -9 mid-job and carries on from what the database holds; a wrong
// password or another farm's database stops it at start, with an error that names the problem
// and never the password.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/farm.h"
#include "tests/support/postgres_server.h"
#include "tests/support/process.h"
#include "tests/support/require.h"
#include "tests/support/scenes.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class PostgresFarmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    pg_ = SharedPostgres(&why);
    TSR_REQUIRE(pg_ != nullptr, "no PostgreSQL for the test: " << why);
  }

  // A new database on the test server, as a store.url.
  std::string NewDatabase() {
    StatusOr<std::string> database = pg_->CreateDatabase();
    EXPECT_TRUE(database.ok()) << database.status().ToString();
    return database.ok() ? pg_->ConnInfo(*database) : "";
  }

  // Counts rows of `table` in the database `conninfo` names.
  std::string Count(const std::string& conninfo, const std::string& table) {
    const std::string dbname = conninfo.substr(conninfo.rfind("dbname=") + 7);
    StatusOr<std::string> n = pg_->Query("SELECT count(*) FROM " + table, dbname);
    return n.ok() ? *n : n.status().ToString();
  }

  PostgresServer* pg_ = nullptr;
};

TEST_F(PostgresFarmTest, RendersAJobAndSurvivesAKilledSchedulerWithItsRecordsOnPostgres) {
  const std::string url = NewDatabase();
  LocalFarm farm("pg-farm");
  farm.AppendSchedulerConfig("store:\n  url: \"" + url + "\"\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  EXPECT_NE(farm.SchedulerLog().find("store: host="), std::string::npos) << farm.SchedulerLog();
  // The records are on the server, not in a SQLite file.
  EXPECT_FALSE(fs::exists(farm.dir() + "/data/tessera.db"));

  std::string error;
  const int64_t id = farm.Submit("name: pg\nscene: scene.yaml\nframes: 1-6\nchunk_size: 1\n",
                                 TinySceneYaml(48, 32, 16), &error);
  ASSERT_GT(id, 0) << error;
  EXPECT_EQ(Count(url, "tasks"), "6");
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto job = farm.Get("/api/v1/jobs/" + std::to_string(id));
        return job.is_object() && job["job"]["tasks"]["done"].get<int>() >= 2;
      },
      60s))
      << farm.SchedulerLog();
  farm.KillScheduler(SIGKILL);
  ASSERT_TRUE(farm.StartScheduler(/*reuse_ports=*/true)) << farm.SchedulerLog();

  const nlohmann::json job = farm.WaitForJob(id, 120s);
  ASSERT_EQ(job["state"], "done") << job.dump(2) << farm.SchedulerLog();
  EXPECT_EQ(job["tasks"]["done"], 6);
  for (int f = 1; f <= 6; ++f) {
    char name[32];
    std::snprintf(name, sizeof(name), "/pg.%04d.png", f);
    EXPECT_TRUE(fs::exists(job["output_dir"].get<std::string>() + name)) << name;
  }
  // One done attempt per task, kept by the server.
  const std::string dbname = url.substr(url.rfind("dbname=") + 7);
  StatusOr<std::string> done =
      pg_->Query("SELECT count(*) FROM task_logs WHERE outcome = 'done'", dbname);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(*done, "6");
}

TEST_F(PostgresFarmTest, ASecondSchedulerOnTheSameDatabaseIsRefusedNamingTheFirst) {
  const std::string url = NewDatabase();
  LocalFarm first("pg-first");
  first.AppendSchedulerConfig("store:\n  url: \"" + url + "\"\n");
  ASSERT_TRUE(first.StartScheduler()) << first.SchedulerLog();
  LocalFarm second("pg-second");
  second.AppendSchedulerConfig("store:\n  url: \"" + url + "\"\n");
  EXPECT_FALSE(second.StartScheduler());
  const std::string log = second.SchedulerLog();
  EXPECT_NE(log.find("is in use by tessera-scheduler"), std::string::npos) << log;
  EXPECT_NE(log.find("pid " + std::to_string(first.scheduler().pid())), std::string::npos) << log;
  // The first one goes on: its farm answers.
  int status = 0;
  first.Get("/api/v1/jobs", &status);
  EXPECT_EQ(status, 200);
  // Once it is gone, the second one starts on the same records.
  first.KillScheduler(SIGKILL);
  ASSERT_TRUE(second.StartScheduler()) << second.SchedulerLog();
}

TEST_F(PostgresFarmTest, AWrongPasswordStopsTheSchedulerWithoutShowingIt) {
  ASSERT_TRUE(pg_->Exec("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = "
                        "'farm_pw') THEN CREATE ROLE farm_pw LOGIN PASSWORD 'right-one'; END IF; "
                        "END $$")
                  .ok());
  const std::string secret = "wr0ng-S3cret";
  LocalFarm farm("pg-password");
  farm.AppendSchedulerConfig("store:\n  url: \"postgresql://farm_pw:" + secret +
                             "@127.0.0.1:" + std::to_string(pg_->port()) + "/postgres\"\n");
  EXPECT_FALSE(farm.StartScheduler());
  const std::string log = farm.SchedulerLog();
  EXPECT_NE(log.find("password"), std::string::npos) << log;
  EXPECT_EQ(log.find(secret), std::string::npos) << log;
}

TEST_F(PostgresFarmTest, AnotherFarmsDatabaseIsRefusedNamingBothFarms) {
  const std::string first = NewDatabase();
  const std::string second = NewDatabase();
  {  // another farm made `second` its own
    LocalFarm other("pg-other-farm");
    other.AppendSchedulerConfig("store:\n  url: \"" + second + "\"\n");
    ASSERT_TRUE(other.StartScheduler()) << other.SchedulerLog();
  }
  LocalFarm farm("pg-this-farm");
  farm.AppendSchedulerConfig("store:\n  url: \"" + first + "\"\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  std::string error;
  ASSERT_GT(
      farm.Submit("name: mine\nscene: scene.yaml\nframes: 1\n", TinySceneYaml(8, 8, 1), &error), 0)
      << error;
  farm.KillScheduler(SIGTERM);

  // The same scheduler (its data folder) pointed at the other farm's database.
  LocalFarm moved("pg-this-farm-moved");
  fs::create_directories(moved.dir() + "/data");
  fs::copy_file(farm.dir() + "/data/farm_id", moved.dir() + "/data/farm_id",
                fs::copy_options::overwrite_existing);
  moved.AppendSchedulerConfig("store:\n  url: \"" + second + "\"\n");
  EXPECT_FALSE(moved.StartScheduler());
  const std::string log = moved.SchedulerLog();
  EXPECT_NE(log.find("farm"), std::string::npos) << log;
  EXPECT_EQ(Count(second, "jobs"), "0") << "nothing is written to a refused database";
}

// A farm moves from SQLite to PostgreSQL with its history: `store copy` while the scheduler is
// stopped, then the scheduler started on PostgreSQL sees the same jobs, tasks and attempts and
// goes on numbering new jobs after the copied ones. A store that already holds records is
// refused and left as it was.
TEST_F(PostgresFarmTest, StoreCopyMovesAFarmFromSqliteToPostgres) {
  LocalFarm farm("pg-copy");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  std::string error;
  const int64_t id = farm.Submit("name: before\nscene: scene.yaml\nframes: 1-3\n",
                                 TinySceneYaml(16, 16, 2), &error);
  ASSERT_GT(id, 0) << error;
  ASSERT_EQ(farm.WaitForJob(id, 60s)["state"], "done") << farm.SchedulerLog();
  farm.KillScheduler(SIGTERM);

  const std::string url = NewDatabase();
  const std::string sqlite = "sqlite:" + farm.dir() + "/data/tessera.db";
  Process copy =
      Process::Start({Bin("tessera-scheduler"), "store", "copy", "--from", sqlite, "--to", url},
                     farm.dir() + "/copy.log");
  ASSERT_EQ(copy.Wait(60s), 0) << ReadFile(farm.dir() + "/copy.log");
  const std::string report = ReadFile(farm.dir() + "/copy.log");
  EXPECT_NE(report.find("the counts match"), std::string::npos) << report;
  EXPECT_EQ(Count(url, "jobs"), "1");
  EXPECT_EQ(Count(url, "tasks"), "3");
  EXPECT_EQ(Count(url, "task_logs"), "3");

  // Again into the same database: refused, nothing written.
  Process again =
      Process::Start({Bin("tessera-scheduler"), "store", "copy", "--from", sqlite, "--to", url},
                     farm.dir() + "/again.log");
  EXPECT_NE(again.Wait(60s), 0);
  EXPECT_NE(ReadFile(farm.dir() + "/again.log").find("already holds records"), std::string::npos)
      << ReadFile(farm.dir() + "/again.log");
  EXPECT_EQ(Count(url, "jobs"), "1");

  // The same scheduler, now on PostgreSQL: the job and its history are there; a new job is 2.
  farm.AppendSchedulerConfig("store:\n  url: \"" + url + "\"\n");
  ASSERT_TRUE(farm.StartScheduler(/*reuse_ports=*/true)) << farm.SchedulerLog();
  const nlohmann::json job = farm.Get("/api/v1/jobs/" + std::to_string(id));
  ASSERT_TRUE(job.is_object()) << job.dump();
  EXPECT_EQ(job["job"]["state"], "done") << job.dump(2);
  EXPECT_EQ(job["job"]["tasks"]["done"], 3);
  const int64_t next =
      farm.Submit("name: after\nscene: scene.yaml\nframes: 1\n", TinySceneYaml(16, 16, 2), &error);
  EXPECT_EQ(next, id + 1) << error;
}

}  // namespace
}  // namespace tessera::testing
