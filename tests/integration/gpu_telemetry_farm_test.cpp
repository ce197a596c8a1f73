// GPU telemetry on a real farm: a real scheduler and a real worker with simulated GPUs whose NVML
// is a fake libnvidia-ml (tests/worker/fake_nvml.cpp) that the worker dlopens like the driver's.
// The test describes the GPUs in the fake's JSON file and watches the figures arrive on
// /metrics, the workers API and its history; then breaks a GPU with an Xid and sees the worker
// marked unhealthy, an alert raised, `why` name the fault, and no task placed on that GPU.

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "shared/images/image_io.h"
#include "tests/support/farm.h"
#include "tests/support/http_get.h"
#include "tests/support/process.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

json Gpu(int util, int mem_used_mb) {
  return {{"util", util},       {"mem_used_mb", mem_used_mb}, {"mem_total_mb", 24576}, {"temp", 64},
          {"power_mw", 187250}, {"sm_clock", 2520},           {"mem_clock", 10501},    {"ecc", 0}};
}

json TheWorker(LocalFarm& farm) {
  const json workers = farm.Get("/api/v1/workers")["workers"];
  return workers.empty() ? json() : workers[0];
}

TEST(GpuTelemetryFarmTest, FiguresReachMetricsAndTheApiAndAnXidTakesTheGpuOutOfService) {
  LocalFarm farm("gpu-telemetry");
  const std::string state = farm.dir() + "/fake-nvml.json";
  auto write_state = [&](const json& gpus) { std::ofstream(state) << json{{"gpus", gpus}}; };
  write_state({Gpu(37, 2048), Gpu(81, 12000)});
  // The worker process inherits where the fake finds its GPUs.
  ::setenv("TESSERA_FAKE_NVML", state.c_str(), 1);

  // A command that waits for a gate, then leaves its frame: the test decides when tasks end.
  const std::string png = farm.dir() + "/frame.png";
  image::ImageBuffer image{4, 4, 3, std::vector<float>(4 * 4 * 3, 0.5f), {}};
  ASSERT_TRUE(image::WriteSrgb8(png, image).ok());
  const std::string gate = farm.dir() + "/gate";
  const std::string script = farm.dir() + "/wait-then-copy.sh";
  WriteFile(script, "#!/bin/sh\nwhile [ ! -e '" + gate + "' ]; do /bin/sleep 0.1; done\n" +
                        "/bin/cp '" + png + "' \"$1/$(printf 'frame_%06d.png' \"$2\")\"\n");
  ::chmod(script.c_str(), 0755);
  farm.set_command_programs({script});
  const std::string config = farm.dir() + "/worker.yaml";
  WriteFile(config, std::string("worker:\n  simulate_gpus: 2\n") +
                        "gpu_telemetry:\n  interval_ms: 200\n  nvml_library: " + TSR_FAKE_NVML +
                        "\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorkerWith("gpus", {"--config", config})) << farm.SchedulerLog();
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s)) << farm.SchedulerLog();

  // /metrics: each figure, per worker and GPU, in base units.
  std::string metrics;
  ASSERT_TRUE(WaitFor(
      [&] {
        metrics = Metrics(farm);
        return metrics.find("tessera_gpu_utilization_percent{worker=\"gpus\",gpu=\"1\"") !=
               std::string::npos;
      },
      30s, 100ms))
      << metrics << farm.SchedulerLog();
  const std::string gpu0 = "{worker=\"gpus\",gpu=\"0\",model=\"Simulated GPU 0\"}";
  const std::string gpu1 = "{worker=\"gpus\",gpu=\"1\",model=\"Simulated GPU 1\"}";
  for (const std::string& line :
       {"tessera_gpu_utilization_percent" + gpu0 + " 37",
        "tessera_gpu_utilization_percent" + gpu1 + " 81",
        "tessera_gpu_memory_used_bytes" + gpu0 + " " + std::to_string(int64_t{2048} << 20),
        "tessera_gpu_memory_total_bytes" + gpu1 + " " + std::to_string(int64_t{24576} << 20),
        "tessera_gpu_temperature_celsius" + gpu0 + " 64",
        "tessera_gpu_power_watts" + gpu0 + " 187.25",
        "tessera_gpu_sm_clock_hertz" + gpu0 + " 2520000000",
        "tessera_gpu_memory_clock_hertz" + gpu0 + " 10501000000",
        "tessera_gpu_ecc_uncorrected_errors" + gpu0 + " 0", "tessera_gpu_healthy" + gpu0 + " 1",
        "tessera_gpu_healthy" + gpu1 + " 1"}) {
    EXPECT_NE(metrics.find("\n" + line + "\n"), std::string::npos) << line << "\n" << metrics;
  }

  // The workers API: the latest reading and a history per GPU, and the worker healthy.
  write_state({Gpu(55, 4096), Gpu(81, 12000)});
  json worker;
  ASSERT_TRUE(WaitFor(
      [&] {
        worker = TheWorker(farm);
        const json& t = worker["gpu_use"][0]["telemetry"];
        return t.is_object() && t.value("utilization_pct", 0) == 55;
      },
      30s, 100ms))
      << worker.dump();
  EXPECT_EQ(worker["health"], "ok") << worker.dump();
  EXPECT_EQ(worker["health_reason"], "");
  const json& history = worker["gpu_use"][0]["history"];
  ASSERT_GE(history["t"].size(), 2u) << worker.dump();
  EXPECT_EQ(history["t"].size(), history["utilization_pct"].size());
  EXPECT_EQ(history["utilization_pct"].back(), 55);
  EXPECT_NE(std::find(history["utilization_pct"].begin(), history["utilization_pct"].end(), 37),
            history["utilization_pct"].end())
      << "the earlier reading is in the history: " << history.dump();
  EXPECT_EQ(worker["gpu_use"][1]["telemetry"]["memory_used_mb"], 12000);
  EXPECT_EQ(worker["gpu_use"][1]["fault"], "");

  // GPU 1 falls off the bus.
  json broken = Gpu(0, 0);
  broken["xids"] = {79};
  write_state({Gpu(55, 4096), broken});
  ASSERT_TRUE(WaitFor(
      [&] {
        worker = TheWorker(farm);
        return worker["health"] == "unhealthy";
      },
      30s, 100ms))
      << worker.dump() << farm.SchedulerLog();
  EXPECT_EQ(worker["health_reason"], "GPU 1: Xid 79: GPU has fallen off the bus");
  EXPECT_EQ(worker["gpu_use"][1]["fault"], "Xid 79: GPU has fallen off the bus");
  EXPECT_EQ(worker["gpu_use"][0]["fault"], "");
  EXPECT_EQ(worker["gpu_use"][1]["telemetry"]["last_xid"], 79);
  metrics = Metrics(farm);
  EXPECT_NE(metrics.find("\ntessera_gpu_healthy" + gpu1 + " 0\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\ntessera_gpu_healthy" + gpu0 + " 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\ntessera_gpu_last_xid" + gpu1 + " 79\n"), std::string::npos);
  const json alerts = farm.Get("/api/v1/summary").value("alerts", json::array());
  bool alerted = false;
  for (const json& a : alerts) {
    alerted = alerted || (a["kind"] == "worker_gpu_fault" &&
                          a["message"].get<std::string>().find("Xid 79") != std::string::npos);
  }
  EXPECT_TRUE(alerted) << alerts.dump();
  // `tessera workers` says so, and shows each GPU's reading.
  const RunResult cli =
      RunProcess({Bin("tessera"), "workers"}, 60s,
                 {"TESSERA_SERVER=" + farm.api_url(), "TESSERA_TOKEN=" + farm.token()});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("(unhealthy)"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("worker gpus is unhealthy: GPU 1: Xid 79: GPU has fallen off the bus"),
            std::string::npos)
      << cli.out;
  EXPECT_NE(cli.out.find("FAULT: Xid 79"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("55%"), std::string::npos) << cli.out;

  // Three one-GPU tasks: only GPU 0 takes them, one at a time, and `why` names the fault.
  std::string error;
  const int64_t job = farm.Submit(
      "name: after-xid\nrenderer: command\nframes: 1-3\nmax_retries: 0\nresources: {gpus: 1}\n"
      "output: {pattern: 'x.####', formats: [png]}\nsettings: {program: " +
          script + ", outputs: images, argv: ['{output_dir}', '{frame_start}']}\n",
      "", &error);
  ASSERT_GT(job, 0) << error;
  auto running = [&] {
    int n = 0;
    for (const json& t : Tasks(farm, job)) n += t["state"] == "running";
    return n;
  };
  ASSERT_TRUE(WaitFor([&] { return running() == 1; }, 30s, 100ms)) << farm.SchedulerLog();
  std::string why;
  for (const json& t : Tasks(farm, job)) {
    if (t["state"] != "queued") continue;
    ASSERT_TRUE(WaitFor(
        [&] {
          why = farm.Get("/api/v1/tasks/" + std::to_string(t["id"].get<int64_t>()) + "/why")
                    .value("reason", "");
          return why.find("unhealthy") != std::string::npos;
        },
        10s, 100ms))
        << why;
    EXPECT_NE(why.find("1 is unhealthy (Xid 79: GPU has fallen off the bus)"), std::string::npos)
        << why;
    break;
  }
  for (int i = 0; i < 5; ++i) {
    worker = TheWorker(farm);
    EXPECT_TRUE(worker["gpu_use"][1]["tasks"].empty()) << "nothing on the faulted GPU";
    EXPECT_EQ(worker["gpu_use"][0]["tasks"].size(), 1u) << worker.dump();
    EXPECT_EQ(running(), 1);
    std::this_thread::sleep_for(100ms);
  }
  WriteFile(gate, "go\n");
  EXPECT_EQ(farm.WaitForJob(job, 120s)["state"], "done") << farm.SchedulerLog();
  ::unsetenv("TESSERA_FAKE_NVML");
}

}  // namespace
}  // namespace tessera::testing
