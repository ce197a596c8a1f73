#include "scheduler/cli/format.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace tessera::cli {

size_t TerminalColumns() {
  if (const char* columns = std::getenv("COLUMNS"); columns != nullptr && *columns != '\0') {
    const long n = std::strtol(columns, nullptr, 10);
    return n > 0 ? static_cast<size_t>(n) : 0;
  }
  winsize size{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  return 0;
}

void Table::Print(std::ostream& out) const { Print(out, TerminalColumns()); }

void Table::Print(std::ostream& out, size_t max_width) const {
  constexpr size_t kGap = 2;
  constexpr size_t kMinColumn = 6;
  std::vector<size_t> widths(headers_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  measure(headers_);
  for (const auto& row : rows_) measure(row);
  // Too wide for the terminal: narrow the widest column, one character at a time, down to
  // kMinColumn; cells that no longer fit end in "~".
  if (max_width > 0 && !widths.empty()) {
    auto total = [&] {
      size_t sum = kGap * (widths.size() - 1);
      for (size_t w : widths) sum += w;
      return sum;
    };
    while (total() > max_width) {
      auto widest = std::max_element(widths.begin(), widths.end());
      if (*widest <= kMinColumn) break;
      --*widest;
    }
  }
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      std::string cell = row[i];
      if (cell.size() > widths[i]) cell = cell.substr(0, widths[i] - 1) + "~";
      line += cell;
      if (i + 1 < row.size()) line += std::string(widths[i] - cell.size() + kGap, ' ');
    }
    out << line << '\n';
  };
  print(headers_);
  for (const auto& row : rows_) print(row);
}

std::string Str(const json& object, const char* key, const std::string& fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number() || it->is_boolean()) return it->dump();
  return fallback;
}

int64_t Int(const json& object, const char* key, int64_t fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return fallback;
  return it->get<int64_t>();
}

double Num(const json& object, const char* key, double fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return fallback;
  return it->get<double>();
}

std::string FormatPercent(double fraction) {
  double clamped = std::clamp(fraction, 0.0, 1.0);
  return std::to_string(static_cast<int>(std::floor(clamped * 100.0))) + "%";
}

std::string FormatFrames(int64_t start, int64_t end) {
  if (start == end) return std::to_string(start);
  return std::to_string(start) + "-" + std::to_string(end);
}

std::string FormatTimestamp(const json& value) {
  if (!value.is_string()) return "-";
  std::string text = value.get<std::string>();
  if (text.size() >= 19 && text[10] == 'T') {
    text[10] = ' ';
    text.resize(19);  // drop fractions and the zone; the API always speaks UTC
  }
  return text;
}

std::string FormatMegabytes(int64_t mb) {
  char buf[32];
  if (mb >= 1024) {
    std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(mb) / 1024.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%lld MiB", static_cast<long long>(mb));
  }
  return buf;
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), unit == 0 ? "%.0f %s" : "%.1f %s", value, kUnits[unit]);
  return buf;
}

std::string FormatMoney(double amount) {
  // In the farm's currency (prices are configuration); small amounts keep four decimals so a
  // short task's share is not shown as 0.00.
  char buf[48];
  std::snprintf(buf, sizeof(buf), std::abs(amount) >= 1 || amount == 0 ? "%.2f" : "%.4f", amount);
  return buf;
}

std::string FormatDuration(double seconds) {
  auto total = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  char buf[48];
  if (total < 60) {
    std::snprintf(buf, sizeof(buf), "%llds", static_cast<long long>(total));
  } else if (total < 3600) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", static_cast<long long>(total / 3600),
                  static_cast<long long>((total % 3600) / 60));
  }
  return buf;
}

const json& Member(const json& object, const char* key) {
  static const json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

}  // namespace tessera::cli
