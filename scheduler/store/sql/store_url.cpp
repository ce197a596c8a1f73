#include "scheduler/store/sql/store_url.h"

#include <libpq-fe.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

namespace tessera::store {

namespace {

constexpr std::string_view kUnparseable = "<unparseable connection string>";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// The length of a URL's scheme prefix ("postgresql://", "postgres://"), 0 for none.
size_t PostgresUrlPrefix(std::string_view s) {
  for (std::string_view p : {"postgresql://", "postgres://"}) {
    if (StartsWith(s, p)) return p.size();
  }
  return 0;
}

// "host=db user=x": a key, optional blanks, '='. (libpq's own test is "contains '='".)
bool LooksLikeKeyValue(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
  if (i == 0) return false;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return i < s.size() && s[i] == '=';
}

// libpq expands a dbname that is itself a connection string; so does redaction.
bool IsConnectionString(std::string_view s) {
  return PostgresUrlPrefix(s) > 0 || s.find('=') != std::string_view::npos;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX decoding, as libpq does for URLs; malformed escapes are kept as written.
std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool IsSecretKey(std::string_view key) { return key == "password" || key == "sslpassword"; }

// A URL's parts as redaction and validation see them: the user information is everything before
// the LAST '@' ahead of the query, so a password holding an unencoded '@' or '/' is still hidden
// whole (libpq, stopping at the first '@' or '/', would misread it; ParseStoreUrl refuses it).
struct UrlParts {
  std::string_view prefix;    // "postgresql://"
  std::string_view userinfo;  // "user:password" ('' when there is no '@')
  bool has_userinfo = false;
  std::string_view rest;   // hosts, ports and database
  std::string_view query;  // after '?', without it
  bool has_query = false;
};

UrlParts SplitUrl(std::string_view url) {
  UrlParts p;
  const size_t prefix = PostgresUrlPrefix(url);
  p.prefix = url.substr(0, prefix);
  std::string_view body = url.substr(prefix);
  const size_t q = body.find('?');
  if (q != std::string_view::npos) {
    p.query = body.substr(q + 1);
    p.has_query = true;
    body = body.substr(0, q);
  }
  const size_t at = body.rfind('@');
  if (at != std::string_view::npos) {
    p.userinfo = body.substr(0, at);
    p.has_userinfo = true;
    body = body.substr(at + 1);
  }
  p.rest = body;
  return p;
}

std::string RedactUrl(std::string_view url) {
  const UrlParts p = SplitUrl(url);
  std::string out(p.prefix);
  if (p.has_userinfo) {
    const std::string_view user = p.userinfo.substr(0, p.userinfo.find(':'));
    if (!user.empty()) out.append(user).append("@");
  }
  out.append(p.rest);
  if (p.has_query) {
    std::string kept;
    std::string_view query = p.query;
    while (!query.empty()) {
      const size_t amp = query.find('&');
      const std::string_view param = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      if (IsSecretKey(PercentDecode(param.substr(0, param.find('='))))) continue;
      kept.append(kept.empty() ? "" : "&").append(param);
    }
    if (!kept.empty()) out.append("?").append(kept);
  }
  return out;
}

// One key=value pair of a libpq connection string: its key, its value unquoted, and its text as
// written.
struct Pair {
  std::string key;
  std::string value;
  std::string_view raw;
};

// libpq's key=value grammar: blanks around '=', a value quoted with '...' (backslash escapes) or
// running to the next blank (backslash escapes too). nullopt when it does not parse.
std::optional<std::vector<Pair>> SplitKeyValues(std::string_view s) {
  std::vector<Pair> pairs;
  size_t i = 0;
  auto blank = [&](size_t at) { return at < s.size() && std::isspace((unsigned char)s[at]); };
  for (;;) {
    while (blank(i)) ++i;
    if (i >= s.size()) return pairs;
    const size_t start = i;
    Pair pair;
    while (i < s.size() && s[i] != '=' && !std::isspace((unsigned char)s[i])) pair.key += s[i++];
    while (blank(i)) ++i;
    if (i >= s.size() || s[i] != '=' || pair.key.empty()) return std::nullopt;
    ++i;
    while (blank(i)) ++i;
    if (i < s.size() && s[i] == '\'') {
      ++i;
      bool closed = false;
      while (i < s.size()) {
        if (s[i] == '\\' && i + 1 < s.size()) {
          pair.value += s[i + 1];
          i += 2;
        } else if (s[i] == '\'') {
          ++i;
          closed = true;
          break;
        } else {
          pair.value += s[i++];
        }
      }
      if (!closed) return std::nullopt;
    } else {
      while (i < s.size() && !std::isspace((unsigned char)s[i])) {
        if (s[i] == '\\' && i + 1 < s.size()) ++i;
        pair.value += s[i++];
      }
    }
    pair.raw = s.substr(start, i - start);
    pairs.push_back(std::move(pair));
  }
}

std::string Quote(std::string_view value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string RedactKeyValues(std::string_view conninfo, int depth) {
  std::optional<std::vector<Pair>> pairs = SplitKeyValues(conninfo);
  if (!pairs) return std::string(kUnparseable);
  std::string out;
  for (const Pair& p : *pairs) {
    if (IsSecretKey(p.key)) continue;
    out.append(out.empty() ? "" : " ");
    if (p.key == "dbname" && IsConnectionString(p.value)) {
      out.append("dbname=").append(Quote(depth > 2 ? std::string(kUnparseable)
                                         : PostgresUrlPrefix(p.value) > 0
                                             ? RedactUrl(p.value)
                                             : RedactKeyValues(p.value, depth + 1)));
    } else {
      out.append(p.raw);
    }
  }
  return out;
}

// The password written in a connection string (as written and as libpq reads it), for scrubbing
// libpq's messages, which may quote the piece of the string they could not parse.
std::vector<std::string> PasswordsIn(std::string_view conninfo) {
  std::vector<std::string> found;
  if (PostgresUrlPrefix(conninfo) > 0) {
    const UrlParts p = SplitUrl(conninfo);
    const size_t colon = p.userinfo.find(':');
    if (colon != std::string_view::npos && colon + 1 < p.userinfo.size()) {
      found.emplace_back(p.userinfo.substr(colon + 1));
      found.push_back(PercentDecode(found.back()));
    }
    std::string_view query = p.query;
    while (!query.empty()) {
      const size_t amp = query.find('&');
      const std::string_view param = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      const size_t eq = param.find('=');
      if (eq != std::string_view::npos && IsSecretKey(PercentDecode(param.substr(0, eq)))) {
        found.emplace_back(param.substr(eq + 1));
        found.push_back(PercentDecode(found.back()));
      }
    }
  } else if (std::optional<std::vector<Pair>> pairs = SplitKeyValues(conninfo)) {
    for (const Pair& p : *pairs) {
      if (IsSecretKey(p.key)) found.push_back(p.value);
      if (p.key == "dbname" && IsConnectionString(p.value)) {
        for (std::string& inner : PasswordsIn(p.value)) found.push_back(std::move(inner));
      }
    }
  }
  return found;
}

std::string ScrubAll(std::string text, const std::vector<std::string>& secrets) {
  for (const std::string& s : secrets) text = ScrubSecret(std::move(text), s);
  return text;
}

struct OptionsDeleter {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};

size_t CountList(const std::string& list) {
  if (list.empty()) return 0;
  size_t n = 1;
  for (char c : list) n += c == ',';
  return n;
}

// What libpq thinks of the connection string, checked before anything connects: it parses, its
// hosts and ports pair up, target_session_attrs is a value libpq knows.
Status CheckWithLibpq(const std::string& conninfo, std::string_view field, bool* has_password) {
  const std::string where(field);
  if (PostgresUrlPrefix(conninfo) > 0) {
    const UrlParts p = SplitUrl(conninfo);
    if (p.has_userinfo && p.userinfo.find_first_of("@/?#") != std::string_view::npos) {
      return Status::InvalidArgument(
          where +
          ": the user name or password holds a character a URL needs percent-encoded (@ as %40, / "
          "as %2F, ? as %3F, # as %23, % as %25)");
    }
  }
  char* error = nullptr;
  std::unique_ptr<PQconninfoOption, OptionsDeleter> options(
      PQconninfoParse(conninfo.c_str(), &error));
  if (!options) {
    std::string message = error ? error : "out of memory";
    PQfreemem(error);
    while (!message.empty() && std::isspace(static_cast<unsigned char>(message.back()))) {
      message.pop_back();
    }
    return Status::InvalidArgument(where + ": not a valid PostgreSQL connection string: " +
                                   ScrubAll(message, PasswordsIn(conninfo)));
  }
  std::string hosts, hostaddrs, ports;
  for (PQconninfoOption* o = options.get(); o->keyword != nullptr; ++o) {
    const std::string value = o->val ? o->val : "";
    const std::string key = o->keyword;
    if (key == "password" && !value.empty()) *has_password = true;
    if (key == "host") hosts = value;
    if (key == "hostaddr") hostaddrs = value;
    if (key == "port") ports = value;
    if (key == "target_session_attrs" && !value.empty()) {
      static constexpr const char* kKnown[] = {"any",     "read-write", "read-only",
                                               "primary", "standby",    "prefer-standby"};
      bool known = false;
      for (const char* k : kKnown) known = known || value == k;
      if (!known) {
        return Status::InvalidArgument(where + ": target_session_attrs '" + value +
                                       "' is not one of any, read-write, read-only, primary, "
                                       "standby, prefer-standby");
      }
    }
  }
  const size_t host_count = std::max(CountList(hosts), CountList(hostaddrs));
  const size_t port_count = CountList(ports);
  if (port_count > 1 && port_count != host_count) {
    return Status::InvalidArgument(where + ": " + std::to_string(host_count) + " host(s) but " +
                                   std::to_string(port_count) +
                                   " ports (give one port for all hosts, or one per host)");
  }
  return Status::Ok();
}

// "mysql" for "mysql://...": a URL scheme, which is not a path.
std::optional<std::string> UrlScheme(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '+' ||
                          s[i] == '.' || s[i] == '-')) {
    ++i;
  }
  if (i == 0 || !std::isalpha(static_cast<unsigned char>(s[0]))) return std::nullopt;
  if (s.substr(i, 3) != "://") return std::nullopt;
  return std::string(s.substr(0, i));
}

StoreUrl SqliteAt(std::string path) {
  std::error_code ec;
  if (!path.empty() && (path.back() == '/' || std::filesystem::is_directory(path, ec))) {
    path = (std::filesystem::path(path) / "tessera.db").string();
  }
  StoreUrl url;
  url.engine = sql::Engine::kSqlite;
  url.sqlite_path = std::move(path);
  return url;
}

}  // namespace

std::string ScrubSecret(std::string text, std::string_view secret) {
  if (secret.empty()) return text;
  for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at + 3)) {
    text.replace(at, secret.size(), "***");
  }
  return text;
}

std::string RedactConnInfo(std::string_view conninfo) {
  conninfo = Trim(conninfo);
  if (PostgresUrlPrefix(conninfo) > 0) return RedactUrl(conninfo);
  return RedactKeyValues(conninfo, 0);
}

std::string StoreUrl::Redacted() const {
  if (engine == sql::Engine::kSqlite) return "sqlite:" + sqlite_path;
  return RedactConnInfo(conninfo);
}

StatusOr<StoreUrl> ParseStoreUrl(std::string_view text, std::string_view field) {
  const std::string where(field);
  text = Trim(text);
  if (text.empty()) return Status::InvalidArgument(where + ": must not be empty");
  if (StartsWith(text, "sqlite:")) {
    std::string_view path = text.substr(7);
    if (StartsWith(path, "//")) path.remove_prefix(2);  // sqlite:///var/... as a URL
    if (path.empty()) {
      return Status::InvalidArgument(where +
                                     ": sqlite: needs a path (sqlite:/var/lib/tessera/tessera.db)");
    }
    return SqliteAt(std::string(path));
  }
  if (PostgresUrlPrefix(text) > 0 || LooksLikeKeyValue(text)) {
    StoreUrl url;
    url.engine = sql::Engine::kPostgres;
    url.conninfo = std::string(text);
    bool has_password = false;
    TSR_RETURN_IF_ERROR(CheckWithLibpq(url.conninfo, field, &has_password));
    return url;
  }
  if (std::optional<std::string> scheme = UrlScheme(text)) {
    return Status::InvalidArgument(where + ": unknown scheme '" + *scheme +
                                   "' (expected sqlite:PATH, a path, postgresql://... or libpq "
                                   "key=value settings)");
  }
  return SqliteAt(std::string(text));
}

StatusOr<std::string> ReadPasswordFile(const std::string& path, std::string_view field) {
  const std::string where(field);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::InvalidArgument(where + ": cannot read " + path + ": " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string password = text.str();
  if (!password.empty() && password.back() == '\n') password.pop_back();
  if (!password.empty() && password.back() == '\r') password.pop_back();
  if (password.empty()) return Status::InvalidArgument(where + ": " + path + " is empty");
  if (password.find_first_of("\r\n") != std::string::npos) {
    return Status::InvalidArgument(where + ": " + path +
                                   " holds more than one line (only the password belongs there)");
  }
  return password;
}

StatusOr<StoreUrl> ResolveStoreUrl(const StoreUrlSources& sources) {
  StatusOr<StoreUrl> url = Status::Internal("unset");
  std::string from;
  if (!Trim(sources.flag).empty()) {
    from = "--store";
    url = ParseStoreUrl(sources.flag, from);
  } else if (!Trim(sources.env_url).empty()) {
    from = "TESSERA_STORE_URL";
    url = ParseStoreUrl(sources.env_url, from);
  } else if (!Trim(sources.config_url).empty()) {
    from = "store.url";
    url = ParseStoreUrl(sources.config_url, from);
  } else {
    if (sources.data_dir.empty()) {
      return Status::InvalidArgument("storage.data_dir: must not be empty");
    }
    url = SqliteAt((std::filesystem::path(sources.data_dir) / "tessera.db").string());
  }
  if (!url.ok() || sources.password_file.empty()) return url;
  if (url->engine != sql::Engine::kPostgres) {
    return Status::InvalidArgument(
        "store.password_file: only a PostgreSQL store takes a "
        "password (the store is " +
        url->Redacted() + ")");
  }
  bool has_password = false;
  TSR_RETURN_IF_ERROR(CheckWithLibpq(url->conninfo, from, &has_password));
  if (has_password) {
    return Status::InvalidArgument("store.password_file: " + from +
                                   " already holds a password; give one or the other");
  }
  TSR_ASSIGN_OR_RETURN(url->password, ReadPasswordFile(sources.password_file));
  return url;
}

}  // namespace tessera::store
