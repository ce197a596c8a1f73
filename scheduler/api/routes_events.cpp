#include <limits>
#include <nlohmann/json.hpp>

#include "scheduler/api/http_api.h"
#include "scheduler/api/reply.h"

namespace tessera::api {

using nlohmann::json;
using security::Caller;
using security::Role;

namespace {

// One reader's view of the event bus as a server-sent event stream: each pull sends what came
// after its cursor. It waits on nothing itself: the server pulls it when HttpApi::PumpEvents
// wakes the streams, and sends keep-alive comments while it is quiet.
class EventStream : public http::EventSource {
 public:
  EventStream(events::EventBus* bus, int64_t cursor) : bus_(bus), cursor_(cursor) {}

  std::optional<std::string> Next() override {
    events::FarmEvents batch = bus_->Since(cursor_, std::chrono::milliseconds(0));
    if (batch.closed) return std::nullopt;
    std::string out;
    if (batch.missed) out += "event: missed\ndata: {}\n\n";
    for (const events::FarmEvent& e : batch.events) {
      out += "id: " + std::to_string(e.seq) + "\nevent: " + e.kind +
             "\ndata: " + e.data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
      cursor_ = e.seq;
    }
    return out;
  }

 private:
  events::EventBus* bus_;
  int64_t cursor_;
};

}  // namespace

void HttpApi::EventRoutes() {
  // Server-sent events. A stream holds a socket and a timer, never a thread; their number is
  // capped by api.max_event_streams (503 beyond it).
  Handle("GET", "/api/v1/events", Role::kViewer, [this](Req req, Res res, const Caller&) {
    events::EventBus* bus = options_.events;
    if (!bus) return ReplyError(res, Status::Unavailable("this scheduler has no event stream"));
    int64_t cursor = bus->last_seq();
    // A reconnecting EventSource sends Last-Event-ID; a script may ask with ?since=SEQ.
    std::string since = req.Header("Last-Event-ID");
    if (req.HasParam("since")) since = req.Param("since");
    if (!since.empty()) {
      StatusOr<int64_t> seq = ParseInt(since, "since", 0, std::numeric_limits<int64_t>::max());
      if (!seq.ok()) return ReplyError(res, seq.status());
      cursor = *seq;
    }
    res.SetHeader("Cache-Control", "no-cache");
    res.SetHeader("X-Accel-Buffering", "no");  // tell reverse proxies not to buffer the stream
    res.content_type = "text/event-stream";
    res.stream = std::make_shared<EventStream>(bus, cursor);
  });
}

void HttpApi::PumpEvents() {
  events::EventBus* bus = options_.events;
  int64_t seen = bus->last_seq();
  for (;;) {
    events::FarmEvents batch = bus->Since(seen, std::chrono::seconds(15), /*max=*/1);
    if (batch.closed) break;
    if (batch.events.empty() && !batch.missed) continue;
    seen = bus->last_seq();
    server_->WakeStreams();
  }
  // The bus is closing: each stream ends when it next pulls.
  server_->WakeStreams();
}

}  // namespace tessera::api
