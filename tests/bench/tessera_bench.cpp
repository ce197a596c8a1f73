// tessera-bench: see bench.h.

#include <cstdio>

#include "tests/bench/bench.h"

namespace tessera::bench {

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

}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{"tessera-bench: Tessera's benchmarks; each ends with one line of key=value figures"};
  app.require_subcommand(1);
  tessera::bench::AddDispatchCommand(app);
  tessera::bench::AddSubmitCommand(app);
  tessera::bench::AddRenderCommand(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
