#pragma once
// Where the farm's records live: `store.url` in the scheduler's configuration, overridden by the
// TESSERA_STORE_URL environment variable, overridden by `--store`. One of
//
//   sqlite:/var/lib/tessera/tessera.db      the embedded engine (the default:
//   <data_dir>/tessera.db) /var/lib/tessera/tessera.db             a bare path, the same (a folder:
//   its tessera.db) postgresql://tessera@db1,db2/tessera?target_session_attrs=read-write
//   host=db1,db2 dbname=tessera user=tessera target_session_attrs=read-write
//
// The PostgreSQL forms are libpq's own (a URL, postgres:// too, or key=value pairs), so every
// libpq setting works: several hosts with target_session_attrs=read-write follow a promoted
// replica, sslmode, passfile. The password comes from `store.password_file` (read once at start,
// its trailing newline stripped), from the URL itself, or from libpq's PGPASSFILE / ~/.pgpass.
// It never appears in a log line, an error, /metrics or the API: everything shows Redacted().

#include <string>
#include <string_view>

#include "scheduler/store/sql/sql_engine.h"
#include "shared/base/status.h"

namespace tessera::store {

struct StoreUrl {
  sql::Engine engine = sql::Engine::kSqlite;
  std::string sqlite_path;  // kSqlite: the database file
  // kPostgres: the libpq connection string or URL as written (it may hold a password: show
  // Redacted() instead), and the password read from store.password_file ('' = none given there).
  std::string conninfo;
  std::string password;

  // The settings with every password removed, for logs, errors, /metrics and the API.
  std::string Redacted() const;
};

// The places a store URL may come from, strongest first.
struct StoreUrlSources {
  std::string flag;           // --store
  std::string env_url;        // TESSERA_STORE_URL
  std::string config_url;     // store.url
  std::string password_file;  // store.password_file (TESSERA_STORE_PASSWORD_FILE)
  std::string data_dir;       // storage.data_dir: the default is sqlite:<data_dir>/tessera.db
};

// The store the sources name: the first URL given (flag, environment, configuration), else
// SQLite in the data folder; with a password file, its password. Errors name the setting that is
// wrong ("--store: ...", "TESSERA_STORE_URL: ...", "store.password_file: ...").
StatusOr<StoreUrl> ResolveStoreUrl(const StoreUrlSources& sources);

// One store URL; an error names `field`. A password file is the caller's (ResolveStoreUrl).
StatusOr<StoreUrl> ParseStoreUrl(std::string_view text, std::string_view field = "store.url");

// A libpq connection string or URL without its passwords (password=, sslpassword=, the password
// of a URL's user), also inside a dbname that is itself a connection string. Text that does not
// parse is never echoed: it becomes "<unparseable connection string>".
std::string RedactConnInfo(std::string_view conninfo);

// The password a password file holds: its text without the trailing newline. An unreadable or
// empty file, or one of several lines, is an error naming `field` and the path.
StatusOr<std::string> ReadPasswordFile(const std::string& path,
                                       std::string_view field = "store.password_file");

// `text` with every occurrence of `secret` replaced by "***" (nothing when `secret` is empty):
// the last guard on messages that quote what a server or library said.
std::string ScrubSecret(std::string text, std::string_view secret);

}  // namespace tessera::store
