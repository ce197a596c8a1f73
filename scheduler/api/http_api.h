#pragma once
// The scheduler's HTTP JSON API (v1) and the dashboard page, served by cpp-httplib on its own
// thread pool. Handlers read through the store's read-only connections and hand anything that
// changes dispatch state (a new job, a cancellation) to the broker.
//
//   POST /api/v1/jobs              {"job_yaml": "...", "scene_yaml": "..."}  -> 201 {"job": JOB}
//   GET  /api/v1/jobs[?state=S&limit=N]                                       -> {"jobs": [...]}
//   GET  /api/v1/jobs/{id}                                                    -> {"job": JOB}
//   GET  /api/v1/jobs/{id}/tasks                                              -> {"tasks": [...]}
//   POST /api/v1/jobs/{id}/cancel                                             -> {"job": JOB}
//   POST /api/v1/jobs/{id}/pause | /resume | /retry                           -> {"job": JOB}
//   POST /api/v1/jobs/{id}/priority {"priority": 0..100}                      -> {"job": JOB}
//   POST /api/v1/jobs/{id}/rerender {"frames": "A-B"}   -> {"job": JOB, "tasks_requeued": N}
//   DELETE /api/v1/jobs/{id}    (finished jobs; output files stay)            -> {"deleted": id}
//   GET  /api/v1/tasks/{id}/why   -> {"task_id", "state", "reason", "details": [...]}
//   GET  /api/v1/workers                                                      -> {"workers": [...]}
//   GET  /api/v1/plugins  -> {"workers": [{"id", "name", "plugins": [{"name", "version"}]}],
//                             "plugins": [{"name", "description", "tiles", "settings": [...]}]}
//   GET  /api/v1/summary                                                      -> farm counters
//   GET  /healthz                                                             -> {"status": "ok"}
//   GET  /                                                                    -> dashboard
// Errors: {"error": "<message naming the field>", "code": "<status code name>"} with a 4xx/5xx.

#include <memory>
#include <string>
#include <thread>

#include "scheduler/broker/broker.h"
#include "scheduler/store/store.h"
#include "shared/status.h"

namespace httplib {
class Server;
}

namespace tessera::api {

struct ApiOptions {
  std::string host = "127.0.0.1";
  int port = 8470;          // 0 picks a free port
  std::string output_root;  // absolute; every job's output directory lies inside it
  int threads = 8;
};

class HttpApi {
 public:
  HttpApi(store::Store& store, broker::Broker& broker, ApiOptions options);
  ~HttpApi();

  // Binds and starts serving; returns the bound port.
  StatusOr<int> Start();
  void Stop();

 private:
  void Routes();
  // Resolves (and creates) a job's output directory inside the output root.
  StatusOr<std::string> OutputDirFor(const std::string& relative, const std::string& name,
                                     int64_t job_id) const;

  store::Store& store_;
  broker::Broker& broker_;
  ApiOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace tessera::api
