#include "scheduler/cli/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tessera::cli {

void Table::Print(std::ostream& out) const {
  std::vector<size_t> widths(headers_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  measure(headers_);
  for (const auto& row : rows_) measure(row);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
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
