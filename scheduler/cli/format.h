#pragma once
// Text helpers for the CLI's human-readable output: aligned tables and tolerant readers for the
// API's JSON (a missing or null field prints as "-" instead of throwing).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace tessera::cli {

using json = nlohmann::json;

// Left-aligned columns separated by two spaces; the last column is not padded.
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  // Fits the terminal (TerminalColumns) by narrowing the widest columns; cut cells end in '~'.
  void Print(std::ostream& out) const;
  void Print(std::ostream& out, size_t max_width) const;  // 0: no limit

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// The width tables must fit: $COLUMNS, else the terminal's width, else 0 (not a terminal: no
// limit, so scripts get whole cells).
size_t TerminalColumns();

// Field readers: `fallback` when the key is absent, null or of another type.
std::string Str(const json& object, const char* key, const std::string& fallback = "-");
int64_t Int(const json& object, const char* key, int64_t fallback = 0);
double Num(const json& object, const char* key, double fallback = 0.0);
// The member `key`, or a null value.
const json& Member(const json& object, const char* key);

std::string FormatPercent(double fraction);            // 0.583 -> "58%"
std::string FormatFrames(int64_t start, int64_t end);  // "1-12", or "7" for one frame
std::string FormatTimestamp(const json& value);  // "2026-12-02T11:00:00Z" -> "2026-12-02 11:00:00"
std::string FormatMegabytes(int64_t mb);         // 24000 -> "23.4 GiB"
std::string FormatBytes(uint64_t bytes);         // 1536 -> "1.5 KiB"
std::string FormatDuration(double seconds);      // 63 -> "1m03s"
std::string FormatMoney(double amount);          // 12.5 -> "12.50", 0.0042 -> "0.0042"

}  // namespace tessera::cli
