#pragma once
// Webhook deliveries: each receiver's cursor into the event log (event_records.h). The notifier
// (scheduler/events/webhooks.h) reads the events after it, sends them, then moves the cursor: an
// event is sent at least once, and again after a restart if its acknowledgement was not stored.
//
// One of the store's record tables (store.h): an engine-neutral interface, implemented for SQLite
// by SqlWebhookCursors (sql/sql_webhook_cursors.h).

#include <cstdint>
#include <string>

#include "shared/base/status.h"

namespace tessera::store {

class WebhookCursors {
 public:
  virtual ~WebhookCursors() = default;

  // The id of the last event `receiver` acknowledged; a receiver seen for the first time starts
  // at the newest event (it is sent what happens from now on, not the farm's history).
  virtual StatusOr<int64_t> WebhookCursor(const std::string& receiver) = 0;
  // Moves the cursor forward (never back).
  virtual Status SetWebhookCursor(const std::string& receiver, int64_t event_id) = 0;
};

}  // namespace tessera::store
