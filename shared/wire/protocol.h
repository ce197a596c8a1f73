#pragma once
// The whole Tessera worker protocol, in one place (in the spirit of zguide's Majordomo mdp.h).
//
// Transport: each worker holds one ZeroMQ DEALER connected to the scheduler's ROUTER.
// Every message is a multipart ZeroMQ message:
//   frame 0  header: 4 bytes  'T' 'S' <protocol version> <MessageType>
//   frame 1  body:   MessagePack-encoded map (the typed structs below, via nlohmann::json)
//   frame 2  payload (optional): raw bytes (kFrameResult pixels, kHandback and kCheckpoint
//            checkpoints, kPiece payload pieces, kBlobData pieces)
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
// Bulk bytes (shared/wire/piece_transfer.h): a worker's message with a payload above kPieceBytes
// goes as kPiece messages, each acknowledged with kPieceAck (a window of kPieceWindow in flight).
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

#include "shared/base/status.h"
#include "shared/wire/msgpack.h"
// The messages, by concern; every file that speaks the protocol includes this header.
#include "shared/wire/protocol_bulk.h"
#include "shared/wire/protocol_fleet.h"
#include "shared/wire/protocol_tasks.h"

namespace tessera::protocol {

// 2: large payloads travel in kPiece messages (1 MiB pieces), job assets as blobs.
inline constexpr uint8_t kVersion = 2;
// Largest ZeroMQ message the scheduler accepts from a worker (ZMQ_MAXMSGSIZE; a peer that sends
// a larger one is disconnected): a 1 MiB piece plus its header, or a message with a task log.
inline constexpr int64_t kMaxMessageBytes = 2 << 20;
// Largest payload a message sent in pieces may reassemble to: a frame result or checkpoint. A
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
  // A piece of a large message (piece_transfer.h). Named CHUNK in earlier builds: only the
  // number travels (the name is for logs), so old and new peers still agree, at version 2.
  kPiece = 10,
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
  kPieceAck = 73,  // was CHUNK_ACK: the same number on the wire, as kPiece
  kBlobData = 74,
};

const char* MessageTypeName(MessageType type);

// A decoded message: type + body (+ payload for kFrameResult, kFileResult, kHandback,
// kCheckpoint, kPiece, kBlobData).
struct Envelope {
  MessageType type = MessageType::kHeartbeat;
  zmq::message_t body;     // a MessagePack map (checked well-formed by Decode)
  zmq::message_t payload;  // empty unless the message carries bulk bytes
  // kPiece's last piece only: the original message's header and body frames.
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
Status Check(PieceAck& m);
Status Check(BlobRequest& m);
Status Check(BlobData& m);
inline Status Check(Welcome&) { return Status::Ok(); }
inline Status Check(Cancel&) { return Status::Ok(); }
inline Status Check(ResultAck&) { return Status::Ok(); }
inline Status Check(Piece&) { return Status::Ok(); }

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
