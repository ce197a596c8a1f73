// tessera-bench: see bench.h.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "shared/base/logging.h"
#include "tests/bench/bench.h"

namespace tessera::bench {

// bench_split.cpp; declared here rather than in bench.h only to keep that header unchanged.
void AddSplitCommand(CLI::App& app);

void PrintFigures(const Figures& figures) {
  std::string line;
  for (const auto& [key, value] : figures) line += (line.empty() ? "" : " ") + key + "=" + value;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

std::string Fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  return buf;
}

TempDir::TempDir(const std::string& name)
    : path_((std::filesystem::temp_directory_path() / name).string()) {
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  const size_t index = static_cast<size_t>(std::clamp(rank, 1.0, double(values.size()))) - 1;
  return values[index];
}

}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{"tessera-bench: Tessera's benchmarks; each ends with one line of key=value figures"};
  app.require_subcommand(1);
  // The scheduler under test logs as it does in production (to stderr, at its default level), so
  // stdout keeps only the benchmarks' progress and figures.
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "scheduler log level: trace, debug, info, warn, error")
      ->capture_default_str();
  app.parse_complete_callback([&log_level] {
    if (tessera::Status s = tessera::logging::Init("scheduler", log_level); !s.ok()) {
      throw CLI::ValidationError("--log-level", s.message());
    }
  });
  tessera::bench::AddDispatchCommand(app);
  tessera::bench::AddSubmitCommand(app);
  tessera::bench::AddRenderCommand(app);
  tessera::bench::AddQueryCommand(app);
  tessera::bench::AddFleetCommand(app);
  tessera::bench::AddMakespanCommand(app);
  tessera::bench::AddAssemblyCommand(app);
  tessera::bench::AddSplitCommand(app);
  tessera::bench::AddAbuseCommand(app);
  tessera::bench::AddCheckpointCommand(app);
  tessera::bench::AddCommandsCommand(app);
  tessera::bench::AddStepsCommand(app);
  tessera::bench::AddStoreEnginesCommand(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
