#pragma once
// `tessera up`: a whole farm on this machine — one tessera-scheduler whose autoscaler keeps N
// local tessera-workers (node group `local`, the local provider) — kept in the foreground until
// SIGINT/SIGTERM. Its workers have no worker config: they render with the path tracer and the
// renderers they find, read no files by absolute path and run no program a job names (the
// command renderer is off: worker.command_programs is empty).

#include <string>

namespace tessera::cli {

struct UpOptions {
  int workers = 2;
  std::string data_dir = "./tessera-data";
  int port = 8470;  // the HTTP API port on 127.0.0.1; 0 lets the scheduler pick one
  // The workers' port (ZeroMQ) on 127.0.0.1, for more workers started by hand
  // (tessera-worker --scheduler tcp://127.0.0.1:PORT); 0 lets the scheduler pick one.
  int broker_port = 0;
  int threads = 0;  // render threads per worker; 0 = cores / workers, at least 1
};

// Exit codes: 0 after a clean SIGINT/SIGTERM shutdown; 1 when the farm could not start (port
// taken, a binary missing, start-up timeout) or a child died unexpectedly; 130 when interrupted
// before the farm was ready. Everything it started is stopped before it returns.
int RunUp(const UpOptions& options);

}  // namespace tessera::cli
