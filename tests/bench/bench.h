#pragma once
// tessera-bench: one benchmark program, one subcommand per benchmark (dispatch, submit, render,
// query, fleet, makespan, assembly, abuse, checkpoint, commands, split, steps, store-engines). Each
// subcommand prints human-readable progress and ends with ONE line of key=value figures, each
// printed beside the baseline or target it is compared to, e.g.
//   tasks_per_s=31000 zmq_loop_per_s=42000 ratio=0.74
// Benchmarks measure ratios against a baseline taken in the same run: the machines they run on
// are shared and noisy.

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tessera::bench {

// One figure of the final line; the value is printed as given.
using Figures = std::vector<std::pair<std::string, std::string>>;

// Prints the final key=value line.
void PrintFigures(const Figures& figures);
std::string Fixed(double value, int decimals = 0);
// The p-th percentile (0..100, nearest rank) of `values`; 0 when empty.
double Percentile(std::vector<double> values, double p);

// A fresh directory under the system temp directory ($TMPDIR), removed again when the benchmark
// ends, also when it throws.
class TempDir {
 public:
  explicit TempDir(const std::string& name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Each benchmark file defines one of these; main() registers them all.
void AddDispatchCommand(CLI::App& app);
void AddSubmitCommand(CLI::App& app);
void AddRenderCommand(CLI::App& app);
void AddQueryCommand(CLI::App& app);
void AddFleetCommand(CLI::App& app);
void AddMakespanCommand(CLI::App& app);
void AddAssemblyCommand(CLI::App& app);
void AddAbuseCommand(CLI::App& app);
void AddCheckpointCommand(CLI::App& app);
void AddCommandsCommand(CLI::App& app);
void AddStepsCommand(CLI::App& app);
void AddStoreEnginesCommand(CLI::App& app);

}  // namespace tessera::bench
