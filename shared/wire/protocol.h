#pragma once
// The whole Tessera worker protocol, in one place (in the spirit of zguide's Majordomo mdp.h).
//
// Transport: each worker holds one ZeroMQ DEALER connected to the scheduler's ROUTER.
// Every message is a multipart ZeroMQ message:
//   frame 0  header: 4 bytes  'T' 'S' <protocol version> <MessageType>
//   frame 1  body:   MessagePack-encoded map (the typed structs below, via nlohmann::json)
//   frame 2  payload (optional): raw bytes (kFrameResult pixels, kHandback and kCheckpoint
//            checkpoints, kChunk pieces, kBlobData pieces)
// The ROUTER side sees the worker's routing identity in front of frame 0.
//
// Conversation:
//   worker -> kRegister(capabilities, renderer plugins)
//                                              scheduler -> kWelcome(worker_id, timings) | kReject
//   A worker's name belongs to its live connection: a kRegister under the name of a connection
//   that is still alive (heartbeating, not closed) from another connection gets kReject with
//   retry_after_ms (not now; try again once that one has gone), never the name.
//   worker -> kHeartbeat every heartbeat_ms    scheduler -> kHeartbeatAck
//   scheduler -> kAssign(task_id, attempt, ...)
//   worker -> kProgress*, kFrameResult* (one per frame), kFileResult* (a command task's
//            `outputs: files`), then kTaskDone | kTaskFailed
//   scheduler -> kCancel(task_id, attempt)      (job cancelled; the worker stops rendering)
//   worker -> kGoodbye on clean shutdown (its leases return to the queue at once)
//   scheduler -> kResultAck(task_id, attempt) once a kTaskDone / kTaskFailed / kHandback and
//                everything the attempt sent before it is durable (or was stale): the worker
//                keeps those messages in its spool and re-sends them after every (re)connect
//                until then, so a scheduler restart or a network cut loses no finished render.
//                A worker that registers with kFeatureAcksInAssign gets them inside its next
//                kAssign instead (Assign.acks) when the same pass gives it one, which spares a
//                message per task on a busy farm; otherwise as kResultAck.
//   scheduler -> kDrain: finish the running tasks, take no new ones, then leave.
//   worker -> kHandback(task_id, attempt, checkpoint) when it must leave mid-task (spot
//                interruption, second SIGTERM): the task is requeued uncharged and its next
//                attempt resumes from the checkpoint.
//   worker -> kCheckpoint(task_id, attempt, frame, samples_done) every Assign.checkpoint_interval_s
//                while a renderer that can checkpoint (TSR_CAP_PERIODIC_CHECKPOINT) renders: the
//                scheduler keeps the task's newest one, and when the attempt is lost without
//                notice (a crash, a kill, a preemption) the next attempt resumes from it
//                (Assign.resume_checkpoint, resume_samples). Not acknowledged, not spooled: a
//                lost checkpoint is only an older resume point. A checkpoint that does not name
//                the task's current attempt (fencing, below) is refused.
//
// Enrolment (CURVE farms): a new worker connects with the key pair derived from its join token,
// sends kEnrol(name, its own public key) and gets kEnrolled (or kReject); it then reconnects
// with its own key pair and registers. The scheduler's ZAP handler admits only the keys of
// valid join tokens and of enrolled workers, and a join-token connection may only enrol. A name
// enrolled with a valid key is never enrolled again with another key (kReject), unless the
// token was made for that name (a replacement machine: the old key's connection is dropped) or
// an operator revoked and readmitted the name.
//   scheduler -> kUnknownWorker when it gets a message from a peer it has not welcomed
//                (e.g. after a scheduler restart, or after it declared the worker dead):
//                the worker registers again.
//
// Bulk bytes (shared/wire/piece_transfer.h): a worker's message with a payload above kChunkBytes
// goes as kChunk pieces, each acknowledged with kChunkAck (a window of kChunkWindow in flight).
// Job assets are content-addressed blobs: a worker asks kBlobRequest(hash, offset, length) for
// what its cache lacks, a window of pieces at a time, and gets kBlobData pieces back.
//
// Fencing: every message about a task carries (task_id, attempt). The scheduler applies a
// message only when it names the task's current attempt; anything else is logged and ignored.
//
// Liveness: a worker that sends nothing for heartbeat_ms * liveness is declared dead and its
// tasks are requeued; a worker that hears nothing from the scheduler for as long reconnects.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "shared/wire/msgpack.h"
#include "shared/base/status.h"

namespace tessera::protocol {

// 2: large payloads travel in kChunk pieces, job assets as blobs.
inline constexpr uint8_t kVersion = 2;
// Largest ZeroMQ message the scheduler accepts from a worker (ZMQ_MAXMSGSIZE; a peer that sends
// a larger one is disconnected): a 1 MiB chunk plus its header, or a message with a task log.
inline constexpr int64_t kMaxMessageBytes = 2 << 20;
// Largest payload a chunked message may reassemble to: a frame result or checkpoint. A
// 4096x2160 frame with 11 float channels is 371 MiB (its exact accumulation 742 MiB); larger
// images must be split into tiles.
inline constexpr int64_t kMaxResultBytes = int64_t{1} << 30;
// Most channels a frame result may carry (beauty plus AOVs).
inline constexpr int kMaxChannels = 32;
// Most slots one shared GPU is cut into (Register.slots_per_gpu, worker.slots_per_gpu).
inline constexpr int kMaxSlotsPerGpu = 32;

// What one message may carry, checked as it is read (Envelope::As), on both sides. Every string
// is either refused or made valid there, so nothing downstream (the store's JSON columns, the
// API's answers, the event stream) can throw on it:
//  - identifiers -- a worker's name, its pools, tags, backends and features, plugin names and
//    capabilities, channel names, blob hashes -- are refused unless they are valid UTF-8 of at
//    most kMaxNameBytes; so is every string of an assignment (scene text, settings, paths), at
//    any length, and a C++ plugin's declaration (at most kMaxDeclarationBytes). They name
//    things people configure and query, or are what a person wrote; replacing a byte would make
//    another name or another scene.
//  - free text a program produced -- host name, OS, versions, GPU names, progress and failure
//    messages, reasons, errors, task logs -- is made valid (each invalid sequence becomes
//    U+FFFD) and cut to its size: kMaxTextBytes, kMaxMessageTextBytes, or the last
//    kMaxTaskLogBytes of a log.
//  - lists are refused beyond their count: kMaxListEntries (pools, tags, backends, features,
//    GPUs, GPU samples, capabilities, GPU indices), kMaxPlugins, kMaxTaskRefs (running, delivering,
//    acks).
inline constexpr size_t kMaxNameBytes = 128;
inline constexpr size_t kMaxTextBytes = 1024;
inline constexpr size_t kMaxMessageTextBytes = 16 * 1024;
inline constexpr size_t kMaxDeclarationBytes = 64 * 1024;  // a C++ plugin's plugin.yaml text
inline constexpr size_t kMaxListEntries = 64;
inline constexpr size_t kMaxPlugins = 256;
// A worker lists each task it runs or still delivers: its slots (at most 64) plus the results
// that finished while the scheduler was away.
inline constexpr size_t kMaxTaskRefs = 4096;

enum class MessageType : uint8_t {
  // worker -> scheduler
  kRegister = 1,
  kHeartbeat = 2,
  kProgress = 3,
  kFrameResult = 4,
  kTaskDone = 5,
  kTaskFailed = 6,
  kGoodbye = 7,
  kEnrol = 8,
  kHandback = 9,
  kChunk = 10,
  kBlobRequest = 11,
  kCheckpoint = 12,
  kFileResult = 13,
  // scheduler -> worker
  kWelcome = 64,
  kReject = 65,
  kHeartbeatAck = 66,
  kAssign = 67,
  kCancel = 68,
  kUnknownWorker = 69,
  kEnrolled = 70,
  kResultAck = 71,
  kDrain = 72,
  kChunkAck = 73,
  kBlobData = 74,
};

const char* MessageTypeName(MessageType type);

struct GpuInfo {
  int index = 0;
  std::string name;
  int64_t memory_mb = 0;
  int compute_major = 0;
  int compute_minor = 0;
  std::string driver_version;   // CUDA version the driver supports, "12.4"; older workers: ""
  std::string runtime_version;  // CUDA runtime the worker was built with, "12.4"
  // PCI address, "0000:3b:00.0" (how the worker matches NVML's devices to CUDA's, whose order
  // differs); "" for simulated GPUs and older workers.
  std::string pci_bus_id;
};

// One GPU's load and health as the worker read it through NVML (worker/gpu_telemetry.h), sent in
// kHeartbeat every gpu_telemetry.interval_ms (DCGM-exporter's figures). -1: not known (the GPU
// or driver does not report it).
struct GpuSample {
  int index = 0;  // the GPU's index in Register.gpus
  int utilization_pct = -1;
  int64_t memory_used_mb = -1;
  int64_t memory_total_mb = -1;
  int temperature_c = -1;
  double power_w = -1;
  int sm_clock_mhz = -1;
  int memory_clock_mhz = -1;
  int64_t ecc_uncorrected = -1;  // uncorrected ECC errors since the driver loaded
  int last_xid = 0;              // the latest Xid error the driver reported (0: none)
  // Non-empty: the GPU is unhealthy and gets no new tasks -- why ("Xid 79: GPU has fallen off
  // the bus"). Once set it stays for the life of the worker process (a reset is needed).
  std::string fault;
};

// Where a worker runs, from its cloud's instance metadata. All empty on premises (or when the
// worker's cloud.provider is none).
struct CloudInfo {
  std::string provider;  // "aws", "gcp", "alibaba", "tencent"; "" = none
  std::string region;
  std::string zone;
  std::string instance_type;
  std::string lifecycle;  // "spot", "on-demand", or "" when the provider does not say
};

struct TaskRef {
  int64_t task_id = 0;
  int attempt = 0;
  bool operator==(const TaskRef&) const = default;
};

// A renderer plugin a worker can run: its program was found and its version detected, or it is
// a C++ plugin the worker loaded (plugins/api/renderer_api.h).
struct PluginOffer {
  std::string name;  // the plugin's name, what jobs give as `renderer:`
  std::string version;
  std::string executable;  // where the worker found it (a C++ plugin: its library)
  // C++ plugins loaded from outside the build also say what a job may give them, so the
  // scheduler can validate jobs naming them: plugin.yaml's `scene:`/`settings:` keys, a line
  // of description and their capabilities ("tiles", "sample_parts", "checkpoint").
  bool native = false;
  std::string description;
  std::vector<std::string> capabilities;
  std::string declaration;
};

// What a worker understands beyond the base protocol (Register.features), so a scheduler only
// uses it with workers that do.
inline constexpr const char* kFeatureAcksInAssign = "acks_in_assign";

struct Register {
  std::string name;  // operator-chosen worker name (defaults to the hostname)
  std::string hostname;
  std::string version;  // tessera version of the worker
  int cpu_cores = 0;
  int64_t ram_mb = 0;
  std::vector<GpuInfo> gpus;
  std::vector<std::string> backends;  // render backends this worker can run: "cpu", "cuda"
  int slots = 1;                      // tasks it runs at once
  // GPU sharing (worker.gpu_sharing): each GPU is cut into slots_per_gpu slots (2..32) that
  // tasks asking for a gpu_share take; 0 (older workers send none): one task per GPU, whole.
  // memory_mb_per_slot: GPU memory each slot gives a task (0: not divided per slot).
  int slots_per_gpu = 0;
  int64_t memory_mb_per_slot = 0;
  std::vector<std::string> pools = {"default"};  // pools it serves; jobs may name pools
  std::vector<std::string> tags;                 // capabilities jobs may require
  // Tasks it is still rendering from before (a reconnect, or a scheduler restart): the
  // scheduler re-attaches those leases when their attempt is still current, and cancels the rest.
  std::vector<TaskRef> running;
  // Renderer plugins it can run (the built-in pathtracer and noop are always there). Older
  // workers send none.
  std::vector<PluginOffer> plugins;
  // Tasks that are finished here but whose results wait in the spool for a kResultAck: their
  // leases are re-attached (without taking a slot) so the re-sent results can be applied.
  std::vector<TaskRef> delivering;
  bool draining = false;  // finishing its tasks before leaving: assign it nothing new
  // Facts about the machine, shown to people (not used for placement). Older workers send none.
  std::string os;  // "Debian GNU/Linux 12 (bookworm), Linux 6.1.0-18-amd64 x86_64"
  std::string cpu_model;
  CloudInfo cloud;
  std::vector<std::string> features;  // kFeature*
};

// A join-token connection asks to enrol a worker under `name` with its own key pair.
struct Enrol {
  std::string name;
  std::string public_key;  // Z85, 40 characters
};

struct Enrolled {
  std::string name;
};

struct Welcome {
  int64_t worker_id = 0;
  int heartbeat_ms = 1000;
  int liveness = 5;  // missed heartbeats before a peer is considered gone
};

struct Reject {
  std::string reason;
  // > 0: not for good, only not now (another live connection holds the worker's name): the
  // worker connects again after this long. 0: refused for good; the worker stops.
  int retry_after_ms = 0;
};

struct Heartbeat {
  // Every task occupying a slot, including cancelled ones whose render is still stopping: the
  // scheduler keeps a cancelled task's slot reserved until it disappears from this list.
  std::vector<TaskRef> running;
  bool draining = false;  // assign it nothing new
  // Non-empty while a filesystem the worker writes (task folders, spool, cache) is full: what
  // and where ("no space left on device: 0 B free of 20 GiB on /var/lib/tessera"). The
  // scheduler assigns it nothing new and raises an alert until it is empty again.
  std::string disk_full;
  // Finished attempts whose results are still on their way (a large frame in chunks) or wait
  // for a kResultAck: their leases are not lost.
  std::vector<TaskRef> delivering;
  // A fresh reading of every GPU, when one was taken since the last heartbeat (empty: none new,
  // or no telemetry). Older workers send none.
  std::vector<GpuSample> gpu_samples;
};

// Part of a frame split across tasks: pixels [x0, x1) x [y0, y1) of the whole frame (a tile;
// all zero means the whole frame), and samples [sample_begin, sample_end) of every pixel
// (sample_end < 0 means all of the scene's samples).
struct FramePart {
  int x0 = 0;
  int y0 = 0;
  int x1 = 0;
  int y1 = 0;
  int sample_begin = 0;
  int sample_end = -1;
  bool whole_region() const { return x1 <= x0 || y1 <= y0; }
  bool whole() const { return whole_region() && sample_begin == 0 && sample_end < 0; }
};

struct SharedOutput {
  std::string dir;
  std::string pattern;  // "name.####"
  std::vector<std::string> formats;
  bool exr_float = false;
};

struct Assign {
  int64_t task_id = 0;
  int attempt = 0;
  int64_t job_id = 0;
  int frame_start = 0;
  int frame_end = 0;  // inclusive
  std::string scene_yaml;
  std::string renderer = "pathtracer";  // spec::kRenderer*: noop tasks report done at once
  std::vector<int> gpus;                // CUDA device indices pinned to this task (may be empty)
  FramePart part;                       // the part of each frame this task renders
  // Renderer plugins: the file name the scene text is written under in the task's folder, the
  // job's settings with the plugin's defaults filled in, and the job's task_timeout (seconds,
  // 0 = none), at which the worker kills the renderer itself.
  std::string scene_name;
  std::map<std::string, std::string> settings;
  int timeout_s = 0;
  // Resuming a handed-back attempt: frames before resume_frame are already delivered, and
  // resume_checkpoint, when set, is the SHA-256 of the blob holding the checkpoint (the path
  // tracer's accumulation, as in kFrameResult) of resume_frame to continue from, fetched like an
  // asset. 0: render every frame from the start.
  int resume_frame = 0;
  std::string resume_checkpoint;
  // Samples the checkpoint holds (what the resumed attempt does not render again); 0 without one.
  int resume_samples = 0;
  // Seconds between the kCheckpoint messages the attempt sends while it renders (the job's
  // checkpoint_interval_s); 0: none. Older schedulers send none.
  int checkpoint_interval_s = 0;
  // The job's resources.gpu_memory_mb: the memory the task may use on each of its GPUs (MiB);
  // 0: no limit. A renderer that needs more fails the task before it allocates.
  int64_t gpu_memory_mb = 0;
  // The job's resources.cpu_cores: the CPU threads the task's render may use (its share of a
  // worker running several tasks at once); 0: the worker's own share per slot.
  int cpu_cores = 0;
  // The job's assets: path (relative to the scene's folder) -> SHA-256 of the blob. The worker
  // fetches those its cache lacks (kBlobRequest) before the render starts.
  std::map<std::string, std::string> assets;
  // Shared-storage jobs (whole frames only): the worker writes each frame's files into `dir`
  // (the scheduler's path, through the worker's path_map) and reports kFrameResult with
  // encoding kEncodingWritten and no pixels. Empty dir: send the pixels.
  SharedOutput output;
  // Results of this worker's earlier attempts that are now durable, as kResultAck would say
  // (workers with kFeatureAcksInAssign only).
  std::vector<TaskRef> acks;
};

struct Progress {
  int64_t task_id = 0;
  int attempt = 0;
  double fraction = 0;  // 0..1 over the whole task
  std::string message;
};

struct FrameResult {
  int64_t task_id = 0;
  int attempt = 0;
  int frame = 0;
  int width = 0;
  int height = 0;
  int channels = 0;  // float32 channels per pixel in the payload, 1..kMaxChannels
  double render_seconds = 0;
  std::string backend;  // "cpu" or "cuda:N"
  // EXR channel names, beauty first ("R", "G", "B", "A", "albedo.R", ..., "Z"); empty means
  // R, G, B, A.
  std::vector<std::string> channel_names;
  FramePart part;  // which part of the frame the pixels are (width x height is the part's size)
  // How the payload is encoded: "" = float32 pixels (width x height x channels);
  // kEncodingAccumulation = an exact accumulation (shared/images/accumulation.h: the path tracer's,
  // or a sample-parts plugin's), which the scheduler merges with the frame's other parts.
  std::string encoding;
};

inline constexpr const char* kEncodingAccumulation = "accumulation";
// The worker wrote the frame's files to shared storage itself (Assign::output); no payload.
inline constexpr const char* kEncodingWritten = "written";

// A task's log: what the worker and the renderer said while it ran, its last kMaxTaskLogBytes
// (sent with the attempt's final message; kept by the scheduler for `tessera logs`).
inline constexpr size_t kMaxTaskLogBytes = 64 * 1024;
// A task's status line (Progress.message: what its program says it does), as the scheduler keeps
// it.
inline constexpr size_t kMaxStatusLineBytes = 256;

// One file a task made (a command task's `outputs: files`): its path relative to the task's
// folder, which is where it lands in the job's output folder. The payload is its bytes (at most
// kMaxResultBytes; chunked like frames), or none with encoding kEncodingWritten when the worker
// put it on the job's shared storage itself. Names are relative paths as spec::ValidateAssetPath
// allows them: nothing a file's name says can leave the output folder.
struct FileResult {
  int64_t task_id = 0;
  int attempt = 0;
  std::string name;
  int64_t size = 0;
  std::string encoding;  // "" or kEncodingWritten
};
// Files one task may send back.
inline constexpr int kMaxOutputFiles = 1000;

struct TaskDone {
  int64_t task_id = 0;
  int attempt = 0;
  std::string log;
  // kFileResult messages this attempt sent before it (the scheduler records the task done only
  // once that many of its files are written).
  int files = 0;
};

// Failure classes a worker reports (TaskFailed::failure_class). Unknown names from a newer
// worker are read as kFailureRender.
inline constexpr const char* kFailureRender = "render";             // the renderer or its input
inline constexpr const char* kFailureStorageFull = "storage_full";  // the worker's disk is full
inline constexpr const char* kFailureAsset = "asset";               // an asset could not be had
inline constexpr const char* kFailureTimeout = "timeout";           // ran past the job's timeout
inline constexpr const char* kFailureNoSlot = "no_slot";            // the worker had no free slot
// Classes a plugin's `failure_classes` (shared/plugins/plugin_file.h) or the path tracer name; the
// scheduler treats each by its policy (a job's `failure_policy`, shared/jobs/job_file.h):
inline constexpr const char* kFailureSceneError = "scene_error";  // the scene is broken: no retry
inline constexpr const char* kFailureOutOfMemory = "out_of_memory";  // RAM or GPU memory ran out
inline constexpr const char* kFailureLicense = "license";  // no licence free: later, uncharged
inline constexpr const char* kFailureCrash = "crash";      // the renderer crashed

struct TaskFailed {
  int64_t task_id = 0;
  int attempt = 0;
  std::string message;
  // Whether the failure counts against the task's retry budget. False when the task is not at
  // fault (the worker had no free slot); the scheduler requeues it uncharged.
  bool charge = true;
  std::string log;
  // What kind of failure (a FailureClass name, below): how the scheduler records the attempt and
  // whether it waits for something (room on a disk) before trying again.
  std::string failure_class = kFailureRender;
};

struct Cancel {
  int64_t task_id = 0;
  int attempt = 0;
};

// The worker must leave before the task is done. Frames before `frame` were delivered; the
// payload, when present, is the checkpoint of `frame` (the path tracer's accumulation of
// samples [part.sample_begin, part.sample_begin + samples_done)).
struct Handback {
  int64_t task_id = 0;
  int attempt = 0;
  int frame = 0;
  int samples_done = 0;
  std::string reason;
  std::string log;
};

// A periodic checkpoint of a running attempt: the payload is the accumulation of `frame`
// (samples [part.sample_begin, part.sample_begin + samples_done)), as in kHandback; frames before
// `frame` were delivered. Chunked like any large payload.
struct Checkpoint {
  int64_t task_id = 0;
  int attempt = 0;
  int frame = 0;
  int samples_done = 0;
};

// Results of (task_id, attempt) are durable at the scheduler: the worker drops them from its spool.
struct ResultAck {
  int64_t task_id = 0;
  int attempt = 0;
};

// One piece of a chunked message (shared/wire/piece_transfer.h): payload bytes [offset, offset +
// size) of `total`; the last piece also carries the original header and body frames.
struct Chunk {
  uint64_t transfer = 0;  // the sender's id for this message
  int64_t offset = 0;
  int64_t total = 0;
};

struct ChunkAck {
  uint64_t transfer = 0;
  int64_t received = 0;    // payload bytes the receiver holds
  int retry_after_ms = 0;  // > 0: not now (memory budget); start again from 0 after this long
  std::string error;       // non-empty: refused for good (the sender drops the message)
};

// A worker asks for bytes [offset, offset + length) of the blob with this SHA-256 (hex).
struct BlobRequest {
  std::string hash;
  int64_t offset = 0;
  int64_t length = 0;
};

// The answer: the payload holds the bytes (at most the length asked for). `error` non-empty:
// the scheduler has no such blob.
struct BlobData {
  std::string hash;
  int64_t offset = 0;
  int64_t total = 0;  // the blob's size
  std::string error;
};

// A decoded message: type + body (+ payload for kFrameResult, kFileResult, kHandback,
// kCheckpoint, kChunk, kBlobData).
struct Envelope {
  MessageType type = MessageType::kHeartbeat;
  zmq::message_t body;     // a MessagePack map (checked well-formed by Decode)
  zmq::message_t payload;  // empty unless the message carries bulk bytes
  // kChunk's last piece only: the original message's header and body frames.
  std::vector<zmq::message_t> extra;

  // Reads the body into a typed struct, straight from its bytes; a mistyped or out-of-range
  // field is kInvalidArgument naming it, a missing one keeps its default.
  template <typename T>
  StatusOr<T> As() const;
  // The body as a JSON document (tools, tests, logs; the daemons read typed structs).
  nlohmann::json Json() const;
};

// Encodes one message as frames, ready for send_multipart (without routing identity): the
// 4-byte header, the MessagePack body, and the payload when there is one.
std::vector<zmq::message_t> EncodeFrames(MessageType type, std::string_view body,
                                         zmq::message_t payload = zmq::message_t());
std::vector<zmq::message_t> Encode(MessageType type, const nlohmann::json& body,
                                   zmq::message_t payload = zmq::message_t());

template <typename T>
std::vector<zmq::message_t> Encode(MessageType type, const T& body,
                                   zmq::message_t payload = zmq::message_t()) {
  msgpack::Writer w;
  Pack(w, body);
  return EncodeFrames(type, w.bytes(), std::move(payload));
}

// Decodes frames[first..]. Malformed input is kInvalidArgument, never a crash.
StatusOr<Envelope> Decode(std::vector<zmq::message_t>& frames, size_t first = 0);

// Missing fields take their defaults (forward compatibility); mistyped fields are errors.
TSR_MESSAGE_FIELDS(GpuInfo, index, name, memory_mb, compute_major, compute_minor, driver_version,
                   runtime_version, pci_bus_id)
TSR_MESSAGE_FIELDS(GpuSample, index, utilization_pct, memory_used_mb, memory_total_mb,
                   temperature_c, power_w, sm_clock_mhz, memory_clock_mhz, ecc_uncorrected,
                   last_xid, fault)
TSR_MESSAGE_FIELDS(CloudInfo, provider, region, zone, instance_type, lifecycle)
TSR_MESSAGE_FIELDS(TaskRef, task_id, attempt)
TSR_MESSAGE_FIELDS(PluginOffer, name, version, executable, native, description, capabilities,
                   declaration)
TSR_MESSAGE_FIELDS(Register, name, hostname, version, cpu_cores, ram_mb, gpus, backends, slots,
                   pools, tags, running, plugins, delivering, draining, os, cpu_model, cloud,
                   features, slots_per_gpu, memory_mb_per_slot)
TSR_MESSAGE_FIELDS(Enrol, name, public_key)
TSR_MESSAGE_FIELDS(Enrolled, name)
TSR_MESSAGE_FIELDS(Welcome, worker_id, heartbeat_ms, liveness)
TSR_MESSAGE_FIELDS(Reject, reason, retry_after_ms)
TSR_MESSAGE_FIELDS(Heartbeat, running, draining, delivering, disk_full, gpu_samples)
TSR_MESSAGE_FIELDS(FramePart, x0, y0, x1, y1, sample_begin, sample_end)
TSR_MESSAGE_FIELDS(SharedOutput, dir, pattern, formats, exr_float)
TSR_MESSAGE_FIELDS(Assign, task_id, attempt, job_id, frame_start, frame_end, scene_yaml, renderer,
                   gpus, part, scene_name, settings, timeout_s, resume_frame, assets, output,
                   resume_checkpoint, acks, resume_samples, checkpoint_interval_s, gpu_memory_mb,
                   cpu_cores)
TSR_MESSAGE_FIELDS(Progress, task_id, attempt, fraction, message)
TSR_MESSAGE_FIELDS(FrameResult, task_id, attempt, frame, width, height, channels, render_seconds,
                   backend, channel_names, part, encoding)
TSR_MESSAGE_FIELDS(FileResult, task_id, attempt, name, size, encoding)
TSR_MESSAGE_FIELDS(TaskDone, task_id, attempt, log, files)
TSR_MESSAGE_FIELDS(TaskFailed, task_id, attempt, message, charge, log, failure_class)
TSR_MESSAGE_FIELDS(Cancel, task_id, attempt)
TSR_MESSAGE_FIELDS(Handback, task_id, attempt, frame, samples_done, reason, log)
TSR_MESSAGE_FIELDS(Checkpoint, task_id, attempt, frame, samples_done)
TSR_MESSAGE_FIELDS(ResultAck, task_id, attempt)
TSR_MESSAGE_FIELDS(Chunk, transfer, offset, total)
TSR_MESSAGE_FIELDS(ChunkAck, transfer, received, retry_after_ms, error)
TSR_MESSAGE_FIELDS(BlobRequest, hash, offset, length)
TSR_MESSAGE_FIELDS(BlobData, hash, offset, total, error)

// The boundary checks above, one per message (Envelope::As calls them after reading): refuse
// what must not be changed, make valid and cut what may be. A message without strings or lists
// has nothing to check.
Status Check(Register& m);
Status Check(Enrol& m);
Status Check(Enrolled& m);
Status Check(Reject& m);
Status Check(Heartbeat& m);
Status Check(Assign& m);
Status Check(Progress& m);
Status Check(FrameResult& m);
Status Check(FileResult& m);
Status Check(TaskDone& m);
Status Check(TaskFailed& m);
Status Check(Handback& m);
Status Check(Checkpoint& m);
Status Check(ChunkAck& m);
Status Check(BlobRequest& m);
Status Check(BlobData& m);
inline Status Check(Welcome&) { return Status::Ok(); }
inline Status Check(Cancel&) { return Status::Ok(); }
inline Status Check(ResultAck&) { return Status::Ok(); }
inline Status Check(Chunk&) { return Status::Ok(); }

template <typename T>
StatusOr<T> Envelope::As() const {
  msgpack::Reader r(body.data(), body.size());
  T value;
  Status s = Unpack(r, value);
  if (s.ok()) s = Check(value);
  if (!s.ok()) {
    return Status::InvalidArgument(std::string(MessageTypeName(type)) + " body: " + s.message());
  }
  return value;
}

}  // namespace tessera::protocol
