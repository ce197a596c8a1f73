// The autoscaler in a real scheduler, with the local provider starting and stopping real worker
// processes: a queue scales the farm out to the group's maximum and back to zero once idle past
// the grace period, without stopping anything that runs; the budget cap holds; a spot group whose
// cloud cannot supply backs off and on-demand covers; a deadline the forecast would miss adds
// capacity. Tasks are a command-renderer script that sleeps, then writes its frames.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <csignal>
#include <set>

#include "shared/images/image_io.h"
#include "tests/support/farm.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

class AutoscalerTest : public ::testing::Test {
 protected:
  // A farm with `groups` (YAML list items under autoscaler.groups) and fast settings.
  void StartFarm(const std::string& name, const std::string& settings, const std::string& groups) {
    farm_ = std::make_unique<LocalFarm>(name);
    // The task: sleep, then write every frame of the task (a PNG made here).
    const std::string png = farm_->dir() + "/frame.png";
    image::ImageBuffer image{8, 8, 3, std::vector<float>(8 * 8 * 3, 0.5f), {}};
    ASSERT_TRUE(image::WriteSrgb8(png, image).ok());
    task_script_ = farm_->dir() + "/task.sh";
    WriteFile(task_script_,
              "#!/bin/sh\nsleep \"$1\"\ni=$3\nwhile [ \"$i\" -le \"$4\" ]; do\n  cp '" + png +
                  "' \"$2/$(printf 'frame_%06d.png' \"$i\")\"\n  i=$((i + 1))\ndone\n");
    ::chmod(task_script_.c_str(), 0755);
    // The local provider's workers inherit the scheduler's environment: they may run the task.
    ::setenv("TESSERA_WORKER_COMMAND_PROGRAMS", task_script_.c_str(), 1);
    farm_->AppendSchedulerConfig("autoscaler:\n  interval_s: 1\n" + settings + "  groups:\n" +
                                 groups);
    ASSERT_TRUE(farm_->StartScheduler()) << farm_->SchedulerLog();
  }

  int64_t SubmitSleeps(const std::string& name, int tasks, double seconds,
                       const std::string& extra = "") {
    std::string error;
    const int64_t id = farm_->Submit(
        "name: " + name + "\nrenderer: command\nframes: 1-" + std::to_string(tasks) +
            "\noutput: {formats: [png]}\n" + extra + "settings: {program: " + task_script_ +
            ", outputs: images" + ", argv: ['" + std::to_string(seconds) +
            "', '{output_dir}', '{frame_start}', '{frame_end}']}\n",
        "", &error);
    EXPECT_GT(id, 0) << error;
    return id;
  }

  // The autoscaler's nodes in `group` that have registered (not just been requested).
  int UpNodes(const nlohmann::json& status, const std::string& group) {
    int n = 0;
    for (const auto& g : status["groups"]) {
      if (g["name"] != group) continue;
      for (const auto& node : g["nodes"]) n += node["state"] != "requested";
    }
    return n;
  }
  int AllNodes(const nlohmann::json& status, const std::string& group) {
    for (const auto& g : status["groups"]) {
      if (g["name"] == group) return static_cast<int>(g["nodes"].size());
    }
    return -1;
  }
  bool Decided(const nlohmann::json& status, const std::string& action, const std::string& text) {
    for (const auto& d : status["decisions"]) {
      if (d["action"] == action && d["reason"].get<std::string>().find(text) != std::string::npos) {
        return true;
      }
    }
    return false;
  }
  // Waits for the job to finish while sampling the autoscaler; returns the job.
  nlohmann::json WatchJob(int64_t id, std::chrono::seconds timeout,
                          const std::function<void(const nlohmann::json&)>& sample) {
    nlohmann::json job;
    WaitFor(
        [&] {
          sample(farm_->Get("/api/v1/autoscaler"));
          job = farm_->Get("/api/v1/jobs/" + std::to_string(id))["job"];
          const std::string state = job.value("state", "");
          return state == "done" || state == "failed" || state == "canceled";
        },
        timeout, 200ms);
    return job;
  }

  std::unique_ptr<LocalFarm> farm_;
  std::string task_script_;
};

constexpr const char* kFast =
    "  scale_in_grace_s: 3\n  cooldown_s: 2\n  default_boot_time_s: 2\n  horizon_s: 10\n"
    "  default_task_seconds: 2\n  registration_timeout_s: 60\n";
constexpr const char* kLocalProvider =
    "      provider: {kind: local, worker_args: [--backend, cpu, --threads, '1']}\n";

TEST_F(AutoscalerTest, QueueScalesOutToMaxThenToZeroWithoutStoppingAnyTask) {
  StartFarm("as-scale", kFast,
            std::string("    - name: od\n") + kLocalProvider +
                "      price_per_hour: 3.6\n      market: on-demand\n      max_nodes: 3\n");
  // An empty queue wants no nodes.
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(AllNodes(farm_->Get("/api/v1/autoscaler"), "od"), 0);

  const int64_t job = SubmitSleeps("hundred", 100, 0.3);
  int most = 0;
  const nlohmann::json done = WatchJob(
      job, 180s, [&](const nlohmann::json& s) { most = std::max(most, AllNodes(s, "od")); });
  ASSERT_EQ(done.value("state", ""), "done") << done.dump() << farm_->SchedulerLog();
  EXPECT_EQ(most, 3) << "the group's maximum, and never more";
  EXPECT_EQ(done["tasks"]["done"], 100);

  // Nothing that ran was stopped: every task finished on its first attempt.
  std::string after;
  int first_attempts = 0;
  do {
    nlohmann::json page = farm_->Get("/api/v1/jobs/" + std::to_string(job) + "/tasks?limit=100" +
                                     (after.empty() ? "" : "&after=" + after));
    for (const auto& t : page["tasks"]) first_attempts += t["attempt"] == 1;
    after = page["next_after"].is_null() ? "" : std::to_string(page["next_after"].get<int64_t>());
  } while (!after.empty());
  EXPECT_EQ(first_attempts, 100);

  // Idle past the grace period: back to zero nodes, every worker gone.
  EXPECT_TRUE(WaitFor([&] { return AllNodes(farm_->Get("/api/v1/autoscaler"), "od") == 0; }, 60s))
      << farm_->Get("/api/v1/autoscaler").dump(2);
  EXPECT_TRUE(
      WaitFor([&] { return farm_->Get("/api/v1/summary")["workers"]["offline"] == 3; }, 30s));
  const nlohmann::json status = farm_->Get("/api/v1/autoscaler");
  EXPECT_TRUE(Decided(status, "scale-out", "od")) << status["decisions"].dump(2);
  EXPECT_TRUE(Decided(status, "scale-in", "idle")) << status["decisions"].dump(2);
  // Each decision is an event too, with its reason.
  EXPECT_NE(farm_->SchedulerLog().find("autoscaler: scale-out"), std::string::npos);

  // Cost: every node cost its group's price while registered; the job's tasks their share.
  const nlohmann::json summary = farm_->Get("/api/v1/summary");
  EXPECT_GT(summary["cost"]["today"].get<double>(), 0) << summary.dump();
  const nlohmann::json final_job = farm_->Get("/api/v1/jobs/" + std::to_string(job))["job"];
  EXPECT_GT(final_job["cost"].get<double>(), 0) << final_job.dump();
  EXPECT_LE(final_job["cost"].get<double>(), summary["cost"]["today"].get<double>() + 1e-9);
  const nlohmann::json workers = farm_->Get("/api/v1/workers")["workers"];
  for (const auto& w : workers) {
    EXPECT_EQ(w["node_group"], "od");
    EXPECT_EQ(w["price_per_hour"], 3.6);
    EXPECT_GT(w["cost"].get<double>(), 0) << w.dump();
  }
  const nlohmann::json costs = farm_->Get("/api/v1/costs?days=7");
  ASSERT_EQ(costs["days"].size(), 1u) << costs.dump();
  EXPECT_DOUBLE_EQ(costs["total"].get<double>(), costs["days"][0]["cost"].get<double>());
}

TEST_F(AutoscalerTest, BudgetCapHoldsTheFarmBelowItsHourlyBudget) {
  StartFarm("as-budget", std::string(kFast) + "  budget_per_hour: 7.5\n",
            std::string("    - name: od\n") + kLocalProvider +
                "      price_per_hour: 3.6\n      max_nodes: 5\n");
  const int64_t job = SubmitSleeps("capped", 30, 0.3);
  int most = 0;
  bool held = false;
  const nlohmann::json done = WatchJob(job, 180s, [&](const nlohmann::json& s) {
    most = std::max(most, AllNodes(s, "od"));
    held = held || Decided(s, "hold", "budget");
    EXPECT_LE(s.value("cost_per_hour", 0.0), 7.5);
  });
  ASSERT_EQ(done.value("state", ""), "done") << done.dump();
  EXPECT_EQ(most, 2) << "two nodes at 3.6/h fit a 7.5/h budget, three do not";
  EXPECT_TRUE(held) << farm_->Get("/api/v1/autoscaler")["decisions"].dump(2);
}

TEST_F(AutoscalerTest, SpotThatCannotBeHadBacksOffAndOnDemandCovers) {
  // The spot group's cloud refuses every request (a fake CLI that fails), after keeping the
  // node's rendered cloud-init file and its base64 form.
  LocalFarm scratch("as-spot-cli");
  const std::string cli = scratch.dir() + "/no-capacity";
  WriteFile(cli,
            "#!/bin/sh\ncp \"$3\" '" + scratch.dir() +
                "/user-data'\nprintf %s \"$4\" | base64 -d > '" + scratch.dir() +
                "/decoded'\necho 'InsufficientInstanceCapacity: no spot capacity' >&2\nexit 1\n");
  ::chmod(cli.c_str(), 0755);
  const std::string cloud_init = scratch.dir() + "/worker.yaml";
  WriteFile(
      cloud_init,
      "#cloud-config\n# name ${TESSERA_WORKER_NAME} pools ${TESSERA_POOLS} tags ${TESSERA_TAGS}\n"
      "# at ${TESSERA_SCHEDULER_ADDRESS} from ${TESSERA_PACKAGE_URL} on "
      "${TESSERA_CLOUD_PROVIDER}\n");
  StartFarm("as-spot", kFast,
            "    - name: spot\n      provider: {kind: command, create: ['" + cli +
                "', run, '{name}', '{user_data}', '{user_data_base64}'], terminate: ['" + cli +
                "', stop, '{id}']}\n      cloud_init: '" + cloud_init +
                "'\n      vars: {package_url: 'https://example.com/t.tgz', cloud_provider: aws}\n"
                "      price_per_hour: 1\n      market: spot\n      max_nodes: 3\n"
                "      tags: [l4]\n"
                "    - name: od\n" +
                kLocalProvider + "      price_per_hour: 3\n      max_nodes: 2\n");
  const int64_t job = SubmitSleeps("spot-first", 20, 0.3);
  bool backed_off = false;
  int od = 0;
  const nlohmann::json done = WatchJob(job, 180s, [&](const nlohmann::json& s) {
    for (const auto& g : s["groups"]) {
      if (g["name"] == "spot" && !g["backoff_until"].is_null()) backed_off = true;
    }
    od = std::max(od, UpNodes(s, "od"));
  });
  ASSERT_EQ(done.value("state", ""), "done") << done.dump();
  EXPECT_TRUE(backed_off);
  EXPECT_GE(od, 1);
  const nlohmann::json status = farm_->Get("/api/v1/autoscaler");
  EXPECT_TRUE(Decided(status, "hold", "InsufficientInstanceCapacity")) << status.dump(2);
  // The node's cloud-init, every placeholder filled, reached the CLI as a file and as base64.
  const std::string user_data = ReadFile(scratch.dir() + "/user-data");
  EXPECT_EQ(user_data, "#cloud-config\n# name spot-1 pools [\"default\"] tags [\"l4\"]\n# at " +
                           farm_->broker_endpoint() + " from https://example.com/t.tgz on aws\n");
  EXPECT_EQ(ReadFile(scratch.dir() + "/decoded"), user_data);
  const nlohmann::json workers = farm_->Get("/api/v1/workers")["workers"];
  for (const auto& w : workers) EXPECT_EQ(w["node_group"], "od");
}

TEST_F(AutoscalerTest, SpotNodeTakenBackBacksOffTheGroupAndOnDemandCovers) {
  StartFarm("as-reclaim", kFast,
            std::string("    - name: spot\n") + kLocalProvider +
                "      price_per_hour: 1\n      market: spot\n      max_nodes: 1\n"
                "    - name: od\n" +
                kLocalProvider + "      price_per_hour: 3\n      max_nodes: 1\n");
  const int64_t job = SubmitSleeps("reclaimed", 30, 0.5);
  // The cloud takes the spot node back: its worker vanishes mid-task.
  std::string pid;
  nlohmann::json seen;
  ASSERT_TRUE(WaitFor(
      [&] {
        seen = farm_->Get("/api/v1/autoscaler");
        for (const auto& g : seen["groups"]) {
          if (g["name"] != "spot") continue;
          for (const auto& n : g["nodes"]) {
            if (n["state"] != "requested") pid = n["provider_id"];
          }
        }
        return !pid.empty();
      },
      60s))
      << seen.dump(2);
  ASSERT_EQ(::kill(std::stoi(pid), SIGKILL), 0);
  bool reclaimed = false;
  const nlohmann::json done = WatchJob(job, 180s, [&](const nlohmann::json& s) {
    for (const auto& g : s["groups"]) {
      reclaimed = reclaimed || (g["name"] == "spot" && g["backoff_cause"] == "a spot reclaim");
    }
  });
  ASSERT_EQ(done.value("state", ""), "done") << done.dump();
  EXPECT_TRUE(reclaimed) << farm_->Get("/api/v1/autoscaler").dump(2);
  EXPECT_TRUE(Decided(farm_->Get("/api/v1/autoscaler"), "give-up", "taken back"));
  // The lost task ran again (a later attempt) without being charged against its retries, and
  // on-demand finished the work.
  EXPECT_EQ(done["tasks"]["failed"], 0);
  const nlohmann::json tasks =
      farm_->Get("/api/v1/jobs/" + std::to_string(job) + "/tasks")["tasks"];
  int rerun = 0;
  for (const auto& t : tasks) {
    EXPECT_EQ(t["failures"], 0) << t.dump();
    rerun += t["attempt"].get<int>() > 1;
  }
  EXPECT_GE(rerun, 1) << "the task the reclaimed node held was run again: " << tasks.dump();
  int on_demand = 0;
  const nlohmann::json workers = farm_->Get("/api/v1/workers")["workers"];
  for (const auto& w : workers) on_demand += w["node_group"] == "od";
  EXPECT_EQ(on_demand, 1);
}

TEST_F(AutoscalerTest, DeadlineTheForecastWouldMissAddsCapacity) {
  // A long horizon: without a deadline, one node would do.
  StartFarm("as-deadline",
            "  scale_in_grace_s: 30\n  cooldown_s: 30\n  default_boot_time_s: 2\n"
            "  horizon_s: 3600\n  default_task_seconds: 2\n",
            std::string("    - name: od\n") + kLocalProvider +
                "      price_per_hour: 2\n      max_nodes: 4\n");
  const int64_t relaxed = SubmitSleeps("relaxed", 4, 1.0);
  ASSERT_EQ(WatchJob(relaxed, 120s, [](const nlohmann::json&) {}).value("state", ""), "done");
  EXPECT_EQ(AllNodes(farm_->Get("/api/v1/autoscaler"), "od"), 1);

  // 24 tasks of ~1 s: one node needs ~24 s, the deadline is 12 s away.
  const auto deadline = std::chrono::system_clock::now() + 12s;
  const std::time_t t = std::chrono::system_clock::to_time_t(deadline);
  char iso[32];
  std::strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  const int64_t urgent = SubmitSleeps("urgent", 24, 1.0, std::string("deadline: ") + iso + "\n");
  bool forecast_shown = false;
  int most = 0;
  const nlohmann::json done = WatchJob(urgent, 180s, [&](const nlohmann::json& s) {
    most = std::max(most, AllNodes(s, "od"));
    const nlohmann::json j = farm_->Get("/api/v1/jobs/" + std::to_string(urgent))["job"];
    forecast_shown = forecast_shown || !j["forecast_finish"].is_null();
  });
  ASSERT_EQ(done.value("state", ""), "done") << done.dump();
  EXPECT_EQ(done["deadline"], std::string(iso, 19) + ".000Z");
  EXPECT_GT(most, 1) << farm_->Get("/api/v1/autoscaler")["decisions"].dump(2);
  EXPECT_TRUE(forecast_shown);
  EXPECT_TRUE(Decided(farm_->Get("/api/v1/autoscaler"), "deadline", "urgent"))
      << farm_->Get("/api/v1/autoscaler")["decisions"].dump(2);
}

TEST_F(AutoscalerTest, CloudNodesSurviveASchedulerRestartAndAreDrainedBeforeTermination) {
  // A fake cloud CLI whose "instances" are worker processes on this machine.
  LocalFarm scratch("as-cloud-cli");
  const std::string cli = scratch.dir() + "/cloud";
  WriteFile(cli, "#!/bin/sh\ncase \"$1\" in\n  run)\n    setsid '" + Bin("tessera-worker") +
                     "' --name \"$2\" --scheduler \"$3\" --backend cpu --threads 1 --data-dir '" +
                     scratch.dir() + "'/\"$2\" >> '" + scratch.dir() +
                     "'/\"$2\".log 2>&1 < /dev/null &\n"
                     // Out of the tool's process group (which goes when the tool exits) first.
                     "    pid=$!\n    sleep 1\n    echo \"i-$pid\" ;;\n"
                     "  stop)\n    echo \"$2\" >> '" +
                     scratch.dir() +
                     "/terminated'\n    kill \"${2#i-}\" 2>/dev/null; true ;;\nesac\n");
  ::chmod(cli.c_str(), 0755);
  StartFarm("as-restart", kFast,
            "    - name: cloud\n      provider: {kind: command, create: ['" + cli +
                "', run, '{name}', '{scheduler}'], terminate: ['" + cli +
                "', stop, '{id}']}\n      price_per_hour: 2\n      max_nodes: 1\n");
  const int64_t job = SubmitSleeps("survives", 12, 1.0);
  std::string id;
  ASSERT_TRUE(WaitFor(
      [&] {
        const nlohmann::json s = farm_->Get("/api/v1/autoscaler");
        for (const auto& n : s["groups"][0]["nodes"]) {
          if (n["state"] == "busy") id = n["provider_id"];
        }
        return !id.empty();
      },
      60s));
  ASSERT_EQ(id.rfind("i-", 0), 0u) << id;

  // The scheduler dies and comes back: it still knows its machine and asks for no other.
  farm_->KillScheduler(SIGKILL);
  ASSERT_TRUE(farm_->StartScheduler(/*reuse_ports=*/true)) << farm_->SchedulerLog();
  int most = 0;
  const nlohmann::json done = WatchJob(
      job, 120s, [&](const nlohmann::json& s) { most = std::max(most, AllNodes(s, "cloud")); });
  ASSERT_EQ(done.value("state", ""), "done") << done.dump();
  EXPECT_EQ(most, 1);
  const nlohmann::json after = farm_->Get("/api/v1/autoscaler");
  EXPECT_EQ(after["groups"][0]["nodes"][0]["provider_id"], id) << after.dump(2);

  // Idle past the grace period: drained through the scheduler, then the instance terminated.
  EXPECT_TRUE(WaitFor([&] { return ReadFile(scratch.dir() + "/terminated") == id + "\n"; }, 60s))
      << farm_->SchedulerLog();
  EXPECT_TRUE(
      WaitFor([&] { return AllNodes(farm_->Get("/api/v1/autoscaler"), "cloud") == 0; }, 30s));
  EXPECT_NE(farm_->SchedulerLog().find("scaled in by the autoscaler"), std::string::npos);
  EXPECT_TRUE(WaitFor([&] { return ::kill(std::stoi(id.substr(2)), 0) != 0; }, 30s))
      << "the drained worker left";
}

TEST_F(AutoscalerTest, BadGroupConfigIsRefusedNamingTheField) {
  LocalFarm farm("as-badconfig");
  farm.AppendSchedulerConfig(
      "autoscaler:\n  groups:\n    - name: a\n      provider: {kind: command, create: [x, "
      "'{nmae}'], terminate: [x, '{id}']}\n      price_per_hour: 1\n      max_nodes: 1\n");
  EXPECT_FALSE(farm.StartScheduler());
  EXPECT_NE(farm.SchedulerLog().find("autoscaler.groups[0].provider.create[1]"), std::string::npos)
      << farm.SchedulerLog();
  EXPECT_NE(farm.SchedulerLog().find("{nmae}"), std::string::npos);
}

}  // namespace
}  // namespace tessera::testing
