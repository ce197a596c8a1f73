// GPU telemetry through NVML (worker/gpu_telemetry.h): the real dlopen path over a fake
// libnvidia-ml (fake_nvml.cpp) whose GPUs the test describes in a JSON file -- figures, PCI
// matching against CUDA's order, and the faults that take a GPU out of service (a critical Xid,
// uncorrected ECC errors, a lost or vanished GPU) -- and the config that turns it on.

#include "worker/gpu_telemetry.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "worker/worker_config.h"

namespace tessera::worker {
namespace {

using nlohmann::json;

class GpuTelemetryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = (std::filesystem::temp_directory_path() /
              ("fake-nvml-" + std::to_string(::getpid()) + ".json"))
                 .string();
    ::setenv("TESSERA_FAKE_NVML", state_.c_str(), 1);
  }
  void TearDown() override {
    std::filesystem::remove(state_);
    ::unsetenv("TESSERA_FAKE_NVML");
  }

  void Write(const json& state) { std::ofstream(state_) << state.dump(); }

  // Two GPUs as NVML numbers them (by PCI address).
  static json TwoGpus() {
    return {{"gpus",
             {{{"pci", "0000:01:00.0"},
               {"util", 37},
               {"mem_used_mb", 1024},
               {"mem_total_mb", 24576},
               {"temp", 61},
               {"power_mw", 215500},
               {"sm_clock", 1980},
               {"mem_clock", 9501},
               {"ecc", 0}},
              {{"pci", "0000:02:00.0"},
               {"util", 90},
               {"mem_used_mb", 20000},
               {"mem_total_mb", 81920},
               {"temp", 75},
               {"power_mw", 650000},
               {"sm_clock", 1755},
               {"mem_clock", 2619}}}}};
  }

  // The GPUs as the worker registers them (CUDA's order, fastest first): NVML's second first.
  static std::vector<protocol::GpuInfo> Registered() {
    protocol::GpuInfo fast, slow;
    fast.index = 0;
    fast.name = "H100";
    fast.pci_bus_id = "0000:02:00.0";
    slow.index = 1;
    slow.name = "L4";
    slow.pci_bus_id = "0000:01:00.0";
    return {fast, slow};
  }

  std::unique_ptr<NvmlReader> Open(const std::vector<protocol::GpuInfo>& gpus) {
    std::string why;
    auto api = nvml::LoadNvml(TSR_FAKE_NVML, &why);
    EXPECT_NE(api, nullptr) << why;
    if (!api) return nullptr;
    auto reader = NvmlReader::Open(api, gpus, &why);
    EXPECT_NE(reader, nullptr) << why;
    return reader;
  }

  std::string state_;
};

TEST_F(GpuTelemetryTest, ReadsEveryFigureOfEachGpuMatchedByPciAddress) {
  Write(TwoGpus());
  auto reader = Open(Registered());
  ASSERT_NE(reader, nullptr);
  const std::vector<protocol::GpuSample> s = reader->Read();
  ASSERT_EQ(s.size(), 2u);
  // Registered GPU 0 is NVML's second device.
  EXPECT_EQ(s[0].index, 0);
  EXPECT_EQ(s[0].utilization_pct, 90);
  EXPECT_EQ(s[0].memory_used_mb, 20000);
  EXPECT_EQ(s[0].memory_total_mb, 81920);
  EXPECT_EQ(s[0].temperature_c, 75);
  EXPECT_DOUBLE_EQ(s[0].power_w, 650.0);
  EXPECT_EQ(s[0].sm_clock_mhz, 1755);
  EXPECT_EQ(s[0].memory_clock_mhz, 2619);
  EXPECT_EQ(s[0].ecc_uncorrected, -1) << "no ECC on that GPU: not known, not zero";
  EXPECT_EQ(s[0].fault, "");
  EXPECT_EQ(s[1].index, 1);
  EXPECT_EQ(s[1].utilization_pct, 37);
  EXPECT_EQ(s[1].memory_used_mb, 1024);
  EXPECT_DOUBLE_EQ(s[1].power_w, 215.5);
  EXPECT_EQ(s[1].ecc_uncorrected, 0);
  EXPECT_EQ(s[1].fault, "");

  // Figures follow the GPU from one reading to the next.
  json state = TwoGpus();
  state["gpus"][1]["util"] = 12;
  Write(state);
  EXPECT_EQ(reader->Read()[0].utilization_pct, 12);
}

TEST_F(GpuTelemetryTest, SimulatedGpusWithoutAnAddressMatchByPosition) {
  Write(TwoGpus());
  std::vector<protocol::GpuInfo> gpus = Registered();
  for (auto& g : gpus) g.pci_bus_id.clear();
  auto reader = Open(gpus);
  ASSERT_NE(reader, nullptr);
  const auto s = reader->Read();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].utilization_pct, 37);
  EXPECT_EQ(s[1].utilization_pct, 90);
}

TEST_F(GpuTelemetryTest, ACriticalXidFaultsItsGpuForGoodAnApplicationXidDoesNot) {
  json state = TwoGpus();
  state["gpus"][0]["xids"] = {13};  // NVML's first = registered GPU 1: the application's error
  state["gpus"][1]["xids"] = {79};  // registered GPU 0 fell off the bus
  Write(state);
  auto reader = Open(Registered());
  ASSERT_NE(reader, nullptr);
  auto s = reader->Read();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].fault, "Xid 79: GPU has fallen off the bus");
  EXPECT_EQ(s[0].last_xid, 79);
  EXPECT_EQ(s[1].fault, "") << "Xid 13 is the application's, the GPU stays in service";
  EXPECT_EQ(s[1].last_xid, 13);
  EXPECT_EQ(s[0].utilization_pct, 90) << "a faulted GPU that still answers is still read";

  // The event is gone from the driver's queue; the fault stays until the worker restarts.
  Write(TwoGpus());
  s = reader->Read();
  EXPECT_EQ(s[0].fault, "Xid 79: GPU has fallen off the bus");
  EXPECT_EQ(s[1].fault, "");
}

TEST_F(GpuTelemetryTest, UncorrectedEccErrorsFaultTheGpu) {
  Write(TwoGpus());
  auto reader = Open(Registered());
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->Read()[1].fault, "");
  json state = TwoGpus();
  state["gpus"][0]["ecc"] = 2;
  Write(state);
  const auto s = reader->Read();
  EXPECT_EQ(s[1].ecc_uncorrected, 2);
  EXPECT_EQ(s[1].fault, "2 uncorrected ECC error(s)");
  EXPECT_EQ(s[0].fault, "");
}

TEST_F(GpuTelemetryTest, ALostOrVanishedGpuIsFaultedAndTheOthersReadOn) {
  Write(TwoGpus());
  auto reader = Open(Registered());
  ASSERT_NE(reader, nullptr);
  json state = TwoGpus();
  state["gpus"][1]["lost"] = true;
  Write(state);
  auto s = reader->Read();
  EXPECT_EQ(s[0].fault, "GPU 0 is lost: GPU is lost");
  EXPECT_EQ(s[0].utilization_pct, -1);
  EXPECT_EQ(s[1].fault, "");
  EXPECT_EQ(s[1].utilization_pct, 37);

  // NVML's first GPU (registered 1) disappears from the bus altogether.
  state = TwoGpus();
  state["gpus"].erase(0);
  Write(state);
  s = reader->Read();
  EXPECT_NE(s[1].fault.find("GPU 1 is gone: no GPU at PCI 0000:01:00.0"), std::string::npos)
      << s[1].fault;
}

TEST_F(GpuTelemetryTest, WithoutTheLibraryOrDriverTheWorkerRunsOnWithoutTelemetry) {
  std::string why;
  EXPECT_EQ(nvml::LoadNvml("/nonexistent/libnvidia-ml.so.1", &why), nullptr);
  EXPECT_NE(why.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << why;
  EXPECT_EQ(
      StartGpuMonitor("/nonexistent/libnvidia-ml.so.1", std::chrono::seconds(1), Registered()),
      nullptr);

  // The library is there but its driver is not loaded.
  Write({{"init_error", 9}, {"gpus", json::array()}});
  auto api = nvml::LoadNvml(TSR_FAKE_NVML, &why);
  ASSERT_NE(api, nullptr) << why;
  EXPECT_EQ(NvmlReader::Open(api, Registered(), &why), nullptr);
  EXPECT_EQ(why, "nvmlInit: Driver Not Loaded");

  // A library that is not NVML at all.
  EXPECT_EQ(nvml::LoadNvml("libc.so.6", &why), nullptr);
  EXPECT_NE(why.find("lacks nvmlInit_v2"), std::string::npos) << why;

  // No GPUs, or telemetry off: nothing is opened.
  Write(TwoGpus());
  EXPECT_EQ(StartGpuMonitor(TSR_FAKE_NVML, std::chrono::seconds(1), {}), nullptr);
  EXPECT_EQ(StartGpuMonitor(TSR_FAKE_NVML, std::chrono::milliseconds(0), Registered()), nullptr);
}

TEST_F(GpuTelemetryTest, TheMonitorHandsOverEachReadingOnce) {
  Write(TwoGpus());
  // A long interval: the reading taken at start is the only one during the test.
  auto monitor = StartGpuMonitor(TSR_FAKE_NVML, std::chrono::minutes(10), Registered());
  ASSERT_NE(monitor, nullptr);
  std::optional<std::vector<protocol::GpuSample>> fresh;
  for (int i = 0; i < 500 && !fresh; ++i) {
    fresh = monitor->TakeFresh();
    if (!fresh) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(fresh.has_value());
  ASSERT_EQ(fresh->size(), 2u);
  EXPECT_EQ((*fresh)[0].utilization_pct, 90);
  EXPECT_FALSE(monitor->TakeFresh().has_value()) << "already handed over";
}

TEST(GpuTelemetryConfigTest, IntervalAndLibraryAreCheckedNamingTheField) {
  auto parse = [](const std::string& text) {
    return ParseWorkerConfig(YAML::Load(text), "host-a");
  };
  auto defaults = parse("worker: {}\n");
  ASSERT_TRUE(defaults.ok()) << defaults.status().message();
  EXPECT_EQ(defaults->gpu_telemetry_interval_ms, 5000);
  EXPECT_EQ(defaults->nvml_library, kDefaultNvmlLibrary);
  auto off = parse("gpu_telemetry: {interval_ms: 0}\n");
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_EQ(off->gpu_telemetry_interval_ms, 0);
  auto fast = parse("gpu_telemetry: {interval_ms: 5}\n");
  ASSERT_FALSE(fast.ok());
  EXPECT_NE(fast.status().message().find("gpu_telemetry.interval_ms"), std::string::npos)
      << fast.status().message();
  auto bad = parse("gpu_telemetry: {nvml_library: \"\"}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gpu_telemetry.nvml_library"), std::string::npos);
  auto unknown = parse("gpu_telemetry: {intervl_ms: 100}\n");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("intervl_ms"), std::string::npos);
}

}  // namespace
}  // namespace tessera::worker
