#pragma once
// WebhookCursors (webhook_cursors.h) on SQLite: the webhook_cursors table (schema 30).

#include <cstdint>
#include <string>

#include "scheduler/store/webhook_cursors.h"

namespace tessera::store {

class Database;

class SqlWebhookCursors : public WebhookCursors {
 public:
  explicit SqlWebhookCursors(Database& db) : db_(db) {}

  StatusOr<int64_t> WebhookCursor(const std::string& receiver) override;
  Status SetWebhookCursor(const std::string& receiver, int64_t event_id) override;

 private:
  Database& db_;
};

}  // namespace tessera::store
