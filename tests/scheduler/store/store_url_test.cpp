// store.url / TESSERA_STORE_URL / --store, the password file, and the redacted form shown in logs,
// errors, /metrics and the API.

#include "scheduler/store/sql/store_url.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace tessera::store {
namespace {

StoreUrl Parse(const std::string& text) {
  StatusOr<StoreUrl> url = ParseStoreUrl(text);
  EXPECT_TRUE(url.ok()) << text << ": " << url.status().ToString();
  return url.ok() ? *url : StoreUrl{};
}

std::string ParseError(const std::string& text, const std::string& field = "store.url") {
  StatusOr<StoreUrl> url = ParseStoreUrl(text, field);
  EXPECT_FALSE(url.ok()) << text;
  if (url.ok()) return "";
  EXPECT_EQ(url.status().code(), StatusCode::kInvalidArgument);
  return url.status().message();
}

class TempFolder {
 public:
  TempFolder() {
    path_ = ::testing::TempDir() + "/store-url-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempFolder() { std::filesystem::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string file = path_ + "/" + name;
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(StoreUrl, SqliteForms) {
  StoreUrl url = Parse("sqlite:/var/lib/tessera/tessera.db");
  EXPECT_EQ(url.engine, sql::Engine::kSqlite);
  EXPECT_EQ(url.sqlite_path, "/var/lib/tessera/tessera.db");
  EXPECT_EQ(url.Redacted(), "sqlite:/var/lib/tessera/tessera.db");

  EXPECT_EQ(Parse("sqlite:///var/lib/t.db").sqlite_path, "/var/lib/t.db");
  EXPECT_EQ(Parse("sqlite:relative/t.db").sqlite_path, "relative/t.db");
  EXPECT_EQ(Parse("  /srv/farm/tessera.db \n").sqlite_path, "/srv/farm/tessera.db");
  EXPECT_EQ(Parse("./data/").sqlite_path, "./data/tessera.db");

  TempFolder dir;  // an existing folder: its tessera.db, as storage.data_dir means today
  EXPECT_EQ(Parse(dir.path()).sqlite_path, dir.path() + "/tessera.db");
}

TEST(StoreUrl, PostgresUrlAndKeyValueForms) {
  StoreUrl url = Parse(
      "postgresql://tessera@db1:5432,db2:5433/farm?target_session_attrs=read-write&sslmode=prefer");
  EXPECT_EQ(url.engine, sql::Engine::kPostgres);
  EXPECT_EQ(url.conninfo,
            "postgresql://tessera@db1:5432,db2:5433/farm?target_session_attrs=read-write&"
            "sslmode=prefer");
  EXPECT_EQ(url.Redacted(), url.conninfo);  // nothing secret in it

  EXPECT_EQ(Parse("postgres://db/farm").engine, sql::Engine::kPostgres);
  EXPECT_EQ(Parse("postgresql:///farm?host=/var/run/postgresql").engine, sql::Engine::kPostgres);

  url = Parse(
      "host=db1,db2 port=5432,5433 dbname=farm user=tessera "
      "target_session_attrs=read-write");
  EXPECT_EQ(url.engine, sql::Engine::kPostgres);
  EXPECT_EQ(url.Redacted(),
            "host=db1,db2 port=5432,5433 dbname=farm user=tessera "
            "target_session_attrs=read-write");
}

TEST(StoreUrl, BadInputNamesTheField) {
  EXPECT_EQ(ParseError(""), "store.url: must not be empty");
  EXPECT_NE(ParseError("sqlite:").find("store.url: sqlite: needs a path"), std::string::npos);
  const std::string scheme = ParseError("mysql://db/farm", "TESSERA_STORE_URL");
  EXPECT_EQ(scheme.rfind("TESSERA_STORE_URL: unknown scheme 'mysql'", 0), 0u) << scheme;
  const std::string option = ParseError("host=db frobnicate=1", "--store");
  EXPECT_EQ(option.rfind("--store: not a valid PostgreSQL connection string", 0), 0u) << option;
  EXPECT_NE(option.find("frobnicate"), std::string::npos) << option;
  EXPECT_NE(ParseError("host=db target_session_attrs=leader").find("target_session_attrs"),
            std::string::npos);
  EXPECT_NE(ParseError("host=a,b,c port=1,2").find("3 host(s) but 2 ports"), std::string::npos);
  EXPECT_NE(ParseError("host='db").find("store.url: "), std::string::npos);
}

TEST(StoreUrl, RedactsThePasswordOfAUrl) {
  // A password with every character a URL makes awkward, percent-encoded as it must be.
  const std::string secret = "p%40ss%3Aw%2Frd%25x";  // p@ss:w/rd%x
  StoreUrl url = Parse("postgresql://tessera:" + secret + "@db1,db2/farm?target_session_attrs=" +
                       "read-write&password=" + secret + "&application_name=t");
  EXPECT_EQ(url.Redacted(),
            "postgresql://tessera@db1,db2/farm?target_session_attrs=read-write&"
            "application_name=t");
  EXPECT_EQ(url.Redacted().find("p%40ss"), std::string::npos);
  EXPECT_EQ(url.Redacted().find("rd%25x"), std::string::npos);

  // Userinfo without a password, an empty password, a password but no user.
  EXPECT_EQ(Parse("postgresql://tessera@db/farm").Redacted(), "postgresql://tessera@db/farm");
  EXPECT_EQ(Parse("postgresql://tessera:@db/farm").Redacted(), "postgresql://tessera@db/farm");
  EXPECT_EQ(Parse("postgresql://:hunter2@db/farm").Redacted(), "postgresql://db/farm");
  // A query key spelled with escapes is still the password.
  EXPECT_EQ(Parse("postgresql://db/farm?pass%77ord=hunter2").Redacted(), "postgresql://db/farm");
}

TEST(StoreUrl, RefusesUnencodedSpecialCharactersWithoutEchoingThem) {
  for (const std::string text :
       {"postgresql://tessera:p@ss@db/farm", "postgresql://tessera:pa/ss@db/farm"}) {
    const std::string message = ParseError(text);
    EXPECT_NE(message.find("percent-encoded"), std::string::npos) << message;
    EXPECT_EQ(message.find("ss@db"), std::string::npos) << message;
    EXPECT_EQ(message.find("p@ss"), std::string::npos) << message;
    // Redaction alone still hides the whole password.
    EXPECT_EQ(RedactConnInfo(text), "postgresql://tessera@db/farm");
  }
  // A malformed escape: libpq quotes the token it could not decode, which is the password.
  const std::string message = ParseError("postgresql://tessera:hunter%zz2@db/farm");
  EXPECT_EQ(message.find("hunter"), std::string::npos) << message;
}

TEST(StoreUrl, RedactsKeyValuePasswordsQuotedOrNot) {
  EXPECT_EQ(RedactConnInfo("host=db password=hunter2 user=tessera"), "host=db user=tessera");
  EXPECT_EQ(RedactConnInfo("host=db password = 'it''s' user=x"), "<unparseable connection string>");
  EXPECT_EQ(RedactConnInfo("host=db password = 'it\\'s a \\\\ secret' user=x sslpassword=k"),
            "host=db user=x");
  EXPECT_EQ(RedactConnInfo("password=hunter2"), "");
  // A dbname that is itself a connection string is expanded by libpq: its password too.
  EXPECT_EQ(RedactConnInfo("dbname='postgresql://u:hunter2@db/farm' connect_timeout=5"),
            "dbname='postgresql://u@db/farm' connect_timeout=5");
  EXPECT_EQ(RedactConnInfo("dbname='host=db password=hunter2'"), "dbname='host=db'");
  // What does not parse is never echoed.
  EXPECT_EQ(RedactConnInfo("host=db password='hunter2"), "<unparseable connection string>");

  StoreUrl url = Parse("host=db dbname=farm password='a b\\'c'");
  EXPECT_EQ(url.Redacted(), "host=db dbname=farm");
}

TEST(StoreUrl, ResolveTakesTheFlagThenTheEnvironmentThenTheConfiguration) {
  StoreUrlSources sources;
  sources.data_dir = "/srv/tessera";
  StatusOr<StoreUrl> url = ResolveStoreUrl(sources);
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->Redacted(), "sqlite:/srv/tessera/tessera.db");

  sources.config_url = "postgresql://db/config";
  EXPECT_EQ(ResolveStoreUrl(sources)->conninfo, "postgresql://db/config");
  sources.env_url = "postgresql://db/env";
  EXPECT_EQ(ResolveStoreUrl(sources)->conninfo, "postgresql://db/env");
  sources.flag = "sqlite:/tmp/flag.db";
  EXPECT_EQ(ResolveStoreUrl(sources)->sqlite_path, "/tmp/flag.db");

  sources.flag = "mysql://x";
  EXPECT_EQ(ResolveStoreUrl(sources).status().message().rfind("--store: ", 0), 0u);
  sources.flag.clear();
  sources.env_url = "host=db nonsense=1";
  EXPECT_EQ(ResolveStoreUrl(sources).status().message().rfind("TESSERA_STORE_URL: ", 0), 0u);

  StoreUrlSources none;
  EXPECT_EQ(ResolveStoreUrl(none).status().message(), "storage.data_dir: must not be empty");
}

TEST(StoreUrl, PasswordFileIsReadOnceWithoutItsNewline) {
  TempFolder dir;
  StoreUrlSources sources;
  sources.config_url = "postgresql://tessera@db/farm";
  sources.password_file = dir.Write("pw", "p@ss:w/rd%x\n");
  StatusOr<StoreUrl> url = ResolveStoreUrl(sources);
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->password, "p@ss:w/rd%x");
  EXPECT_EQ(url->Redacted(), "postgresql://tessera@db/farm");

  sources.password_file = dir.Write("crlf", "secret\r\n");
  EXPECT_EQ(ResolveStoreUrl(sources)->password, "secret");
  sources.password_file = dir.Write("none", "secret");
  EXPECT_EQ(ResolveStoreUrl(sources)->password, "secret");
}

TEST(StoreUrl, PasswordFileMistakesAreNamed) {
  TempFolder dir;
  StoreUrlSources sources;
  sources.config_url = "postgresql://tessera@db/farm";
  sources.password_file = dir.path() + "/missing";
  std::string message = ResolveStoreUrl(sources).status().message();
  EXPECT_EQ(message.rfind("store.password_file: cannot read " + dir.path() + "/missing", 0), 0u)
      << message;

  sources.password_file = dir.Write("empty", "\n");
  EXPECT_EQ(ResolveStoreUrl(sources).status().message(),
            "store.password_file: " + dir.path() + "/empty is empty");
  sources.password_file = dir.Write("two", "secret\nmore\n");
  message = ResolveStoreUrl(sources).status().message();
  EXPECT_NE(message.find("more than one line"), std::string::npos);
  EXPECT_EQ(message.find("secret"), std::string::npos);

  sources.password_file = dir.Write("pw", "secret\n");
  sources.config_url = "postgresql://tessera:other@db/farm";
  message = ResolveStoreUrl(sources).status().message();
  EXPECT_EQ(message,
            "store.password_file: store.url already holds a password; give one or the "
            "other");
  sources.config_url = "sqlite:/srv/t.db";
  EXPECT_NE(ResolveStoreUrl(sources).status().message().find("only a PostgreSQL store"),
            std::string::npos);
}

TEST(StoreUrl, ScrubSecretReplacesEveryOccurrence) {
  EXPECT_EQ(ScrubSecret("a hunter2 b hunter2", "hunter2"), "a *** b ***");
  EXPECT_EQ(ScrubSecret("nothing", ""), "nothing");
  EXPECT_EQ(ScrubSecret("aaaa", "aa"), "******");
}

}  // namespace
}  // namespace tessera::store
