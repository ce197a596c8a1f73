// tessera-bench split: end-to-end wall time of ONE frame rendered whole on one worker, and split
// into 4 (2x2) and 16 (4x4) tiles over as many simulated workers, with the real scheduler in this
// process (store, broker, assembler). Each simulated worker, on its own thread with its own DEALER
// socket, "renders" its part by waiting its share of a synthetic cost (--frame-seconds x its
// share of the frame's pixels), then sends what a real worker sends: the whole frame as float
// pixels, or its tile as the path tracer's exact accumulation (in kPiece messages, as every payload
// above kPieceBytes goes), and kTaskDone. The scheduler stores the parts, assembles the frame and
// writes it (EXR + PNG); the clock runs from the job's submission (the store commit) until the
// store records the job done. The three frames are then read back: they must be the same pixels.
// Parallel efficiency of a k-way split: T1 / (k x Tk) (1 would be a perfect split: no dispatch,
// transfer or assembly cost).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <optional>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "plugins/pathtracer/kernel.h"
#include "scheduler/broker/broker.h"
#include "scheduler/store/store.h"
#include "shared/images/accumulation.h"
#include "shared/images/image_io.h"
#include "shared/wire/piece_transfer.h"
#include "shared/wire/protocol.h"
#include "tests/bench/bench.h"
#include "tests/bench/sim_fleet.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;
using protocol::MessageType;

// Shared by the worker threads and the main thread.
struct SplitRun {
  int width = 0;
  int height = 0;
  int channels = 4;
  int samples = 16;
  double frame_seconds = 0;
  std::atomic<int> welcomed{0};
  std::atomic<bool> stop{false};
  std::atomic<int> refused{0};  // results the scheduler refused for good
  // When the latest part finished "rendering" (steady_clock ticks).
  std::atomic<int64_t> last_rendered{0};
};

// The synthetic frame: smooth, lit, finite, alpha 1 (every sample of a pixel the same).
double Value(int x, int y, int c) {
  if (c == 3) return 1.0;
  return 0.05 + 0.9 * ((c % 3 == 0 ? x : c % 3 == 1 ? y : x + y) % 256) / 255.0;
}

// What a real worker would send for `a`: [header, body, payload].
std::vector<zmq::message_t> Render(const SplitRun& run, const protocol::Assign& a) {
  const protocol::FramePart& part = a.part;
  accumulation::RenderedImage image;
  image.frame = a.frame_start;
  image.frame_width = run.width;
  image.frame_height = run.height;
  image.x0 = part.whole_region() ? 0 : part.x0;
  image.y0 = part.whole_region() ? 0 : part.y0;
  image.width = part.whole_region() ? run.width : part.x1 - part.x0;
  image.height = part.whole_region() ? run.height : part.y1 - part.y0;
  image.channels = run.channels;
  for (int c = 0; c < run.channels; ++c) {
    image.channel_names.push_back(c < 4 ? std::string(1, "RGBA"[c]) : "aov" + std::to_string(c));
  }
  image.sample_count = run.samples;
  image.sums.resize(static_cast<size_t>(image.width) * image.height * image.channels);
  size_t i = 0;
  for (int y = image.y0; y < image.y0 + image.height; ++y) {
    for (int x = image.x0; x < image.x0 + image.width; ++x) {
      for (int c = 0; c < run.channels; ++c) {
        image.sums[i++] =
            run.samples * pathtracer::kernel::ToFixed(static_cast<float>(Value(x, y, c)));
      }
    }
  }
  protocol::FrameResult r{a.task_id,    a.attempt, a.frame_start, image.width,        image.height,
                          run.channels, 0.0,       "sim",         image.channel_names};
  r.part = part;
  if (!part.whole()) {  // a part: the exact accumulation, merged by the scheduler
    r.encoding = protocol::kEncodingAccumulation;
    StatusOr<std::string> bytes = accumulation::SerializeAccumulation(image);
    TSR_CHECK(bytes.ok());  // the shape is this function's own
    return protocol::Encode(MessageType::kFrameResult, r,
                            zmq::message_t(bytes->data(), bytes->size()));
  }
  accumulation::FinishPixels(&image);  // the whole frame: its float pixels
  return protocol::Encode(MessageType::kFrameResult, r,
                          zmq::message_t(image.pixels.data(), image.pixels.size() * sizeof(float)));
}

// One simulated worker with one slot; runs on its own thread, which owns the socket.
void SimulateWorker(zmq::context_t& ctx, const std::string& endpoint, int index, SplitRun& run) {
  FakeWorker sim(ctx, endpoint, FakeWorker::Registration("split-" + std::to_string(index)));
  sim.Register();
  auto try_send = [&](std::vector<zmq::message_t>& frames) { return sim.TrySend(frames); };

  Clock::time_point due;
  std::optional<protocol::Assign> task;            // rendering
  std::optional<protocol::TaskRef> delivering;     // its result on the way
  std::vector<zmq::message_t> result;              // ready once `due`
  std::deque<std::vector<zmq::message_t>> outbox;  // in order: result, then done
  protocol::PieceSender pieces;
  while (!run.stop.load()) {
    for (protocol::Envelope& env : sim.Poll(task ? due : Clock::time_point::max())) {
      const auto now = Clock::now();
      if (env.type == MessageType::kWelcome) {
        ++run.welcomed;
      } else if (env.type == MessageType::kPieceAck) {
        auto ack = env.As<protocol::PieceAck>();
        if (ack.ok() && pieces.OnAck(*ack, now)) ++run.refused;
      } else if (env.type == MessageType::kAssign) {
        auto a = env.As<protocol::Assign>();
        if (!a.ok()) continue;
        if (task || delivering) {
          sim.RefuseBusy(*a);
          continue;
        }
        // Its share of the frame's cost, from the assignment on (making the payload included).
        const protocol::FramePart& p = a->part;
        const double share = p.whole_region() ? 1.0
                                              : static_cast<double>(p.x1 - p.x0) * (p.y1 - p.y0) /
                                                    (static_cast<double>(run.width) * run.height);
        due = now + std::chrono::microseconds(std::llround(run.frame_seconds * share * 1e6));
        task = *a;
        result = Render(run, *a);
      }
    }
    const auto now = Clock::now();
    if (task && now >= due) {
      const int64_t at = now.time_since_epoch().count();
      for (int64_t seen = run.last_rendered.load(); seen < at;) {
        if (run.last_rendered.compare_exchange_weak(seen, at)) break;
      }
      outbox.push_back(std::move(result));
      outbox.push_back(protocol::Encode(MessageType::kTaskDone,
                                        protocol::TaskDone{task->task_id, task->attempt}));
      delivering = protocol::TaskRef{task->task_id, task->attempt};
      task.reset();
    }
    // Messages leave in order; a large one in pieces, before the next may go.
    for (;;) {
      if (pieces.active()) pieces.Pump(try_send, now);
      if (pieces.active() || outbox.empty()) break;
      if (protocol::PieceSender::NeedsPieces(outbox.front())) {
        pieces.Start(std::move(outbox.front()));
      } else if (!try_send(outbox.front())) {
        break;
      }
      outbox.pop_front();
    }
    if (delivering && outbox.empty() && !pieces.active()) delivering.reset();
    sim.running.clear();
    if (task) sim.running.push_back({task->task_id, task->attempt});
    sim.delivering.clear();
    if (delivering) sim.delivering.push_back(*delivering);
    sim.BeatIfDue(now);
  }
}

struct Measured {
  double seconds = 0;
  double tail_seconds = 0;       // from the last part rendered to the job recorded done
  double assembler_seconds = 0;  // the assembler's threads busy (parts stored, frame written)
  std::string exr;               // the frame written
};

// Submits the frame split `ways` ways (1, 4 = 2x2, 16 = 4x4) and waits until it is written.
Measured RunSplit(store::Store& store, broker::Broker& broker, const SplitRun& run,
                  const std::string& dir, int ways) {
  spec::JobSpec job;
  job.name = "split-" + std::to_string(ways);
  job.scene_yaml = "width: " + std::to_string(run.width) + "\n";
  job.frame_start = job.frame_end = 1;
  job.tiles_x = job.tiles_y = static_cast<int>(std::lround(std::sqrt(ways)));
  job.output.pattern = "frame.####";
  if (Status s = spec::SplitFrames(&job, run.width, run.height, run.samples); !s.ok()) {
    throw CLI::RuntimeError(s.ToString(), 1);
  }
  const double busy_before = broker.counters().assembler.busy_seconds;
  const auto start = Clock::now();
  const int64_t id = StoreJob(store, job, dir);
  broker.JobSubmitted(id);
  const auto give_up = start + std::chrono::duration<double>(3 * run.frame_seconds + 60);
  for (;;) {
    auto j = store.GetJob(id);
    if (j.ok() && j->terminal()) {
      const auto end = Clock::now();
      const double seconds = std::chrono::duration<double>(end - start).count();
      const Clock::time_point rendered{Clock::duration(run.last_rendered.load())};
      if (j->state != store::JobState::kDone) {
        throw CLI::RuntimeError(job.name + ": the job ended " + store::JobStateName(j->state), 1);
      }
      return {seconds, std::chrono::duration<double>(end - rendered).count(),
              broker.counters().assembler.busy_seconds - busy_before,
              j->output_dir + "/frame.0001.exr"};
    }
    if (Clock::now() > give_up) throw CLI::RuntimeError(job.name + ": did not finish in time", 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

void AddSplitCommand(CLI::App& app) {
  struct Options {
    double frame_seconds = 30;
    int width = 1920;
    int height = 1080;
    int channels = 4;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "split", "one frame split 1, 4 and 16 ways over as many simulated workers: efficiency");
  cmd->add_option("--frame-seconds", opts->frame_seconds,
                  "synthetic render time of the whole frame on one worker")
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--width", opts->width, "frame width")->check(CLI::Range(4, 8192));
  cmd->add_option("--height", opts->height, "frame height")->check(CLI::Range(4, 8192));
  cmd->add_option("--channels", opts->channels, "channels (RGBA, then AOVs)")
      ->check(CLI::Range(4, protocol::kMaxChannels));
  cmd->callback([opts] {
    SplitRun run;
    run.width = opts->width;
    run.height = opts->height;
    run.channels = opts->channels;
    run.frame_seconds = opts->frame_seconds;
    constexpr int kWays[] = {1, 4, 16};
    constexpr int kWorkers = 16;

    TempDir temp("tessera-bench-split");
    auto store = OpenStore(temp.path());
    broker::Broker broker(*store, LoopbackBroker(), tessera::Clock::Real());
    const std::string endpoint = StartBroker(broker);
    zmq::context_t ctx;
    std::vector<std::thread> workers;
    for (int i = 0; i < kWorkers; ++i) {
      workers.emplace_back([&, i] { SimulateWorker(ctx, endpoint, i, run); });
    }
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (run.welcomed.load() < kWorkers && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }

    std::vector<Measured> measured;
    std::optional<CLI::RuntimeError> failed;
    try {
      for (int ways : kWays) {
        measured.push_back(RunSplit(*store, broker, run, temp.path(), ways));
        const double ideal = run.frame_seconds / ways;
        std::printf(
            "%2d way%s: %.3f s (ideal %.3f s, %.3f s more; last part rendered to frame done: "
            "%.3f s; assembler busy %.3f s)\n",
            ways, ways > 1 ? "s" : " ", measured.back().seconds, ideal,
            measured.back().seconds - ideal, measured.back().tail_seconds,
            measured.back().assembler_seconds);
        std::fflush(stdout);
      }
    } catch (const CLI::RuntimeError& e) {
      failed = e;
    }
    run.stop = true;
    for (auto& t : workers) t.join();
    broker.Stop();
    if (failed) throw *failed;

    bool same = run.refused.load() == 0;
    auto first = image::Read(measured[0].exr);
    for (size_t i = 1; i < measured.size() && same; ++i) {
      auto other = image::Read(measured[i].exr);
      same = first.ok() && other.ok() && first->pixels == other->pixels;
    }
    std::printf("%dx%d, %d channels, %.1f s of rendering per frame: the three frames are %s\n",
                run.width, run.height, run.channels, run.frame_seconds,
                same ? "the same pixels" : "NOT the same");
    if (!same) throw CLI::RuntimeError("the split frames differ from the whole one", 1);
    const double t1 = measured[0].seconds, t4 = measured[1].seconds, t16 = measured[2].seconds;
    PrintFigures({{"width", std::to_string(run.width)},
                  {"height", std::to_string(run.height)},
                  {"channels", std::to_string(run.channels)},
                  {"frame_s", Fixed(run.frame_seconds, 1)},
                  {"t1_s", Fixed(t1, 3)},
                  {"t4_s", Fixed(t4, 3)},
                  {"t16_s", Fixed(t16, 3)},
                  {"efficiency_4", Fixed(t1 / (4 * t4), 3)},
                  {"efficiency_16", Fixed(t1 / (16 * t16), 3)}});
  });
}

}  // namespace tessera::bench
