#pragma once
// tessera-bench: one benchmark program, one subcommand per benchmark (dispatch, submit, render,
// ...). Each subcommand prints human-readable progress and ends with ONE line of key=value
// figures, each printed beside the baseline it is compared to, e.g.
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

// Each benchmark file defines one of these; main() registers them all.
void AddDispatchCommand(CLI::App& app);
void AddSubmitCommand(CLI::App& app);
void AddRenderCommand(CLI::App& app);

}  // namespace tessera::bench
