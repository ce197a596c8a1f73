// Writes the MessagePack seed corpus: real protocol messages, encoded as the daemons encode
// them, plus edge cases (invalid UTF-8 in names and text, lists at and past their limits, deep
// nesting, every integer width). Usage: fuzz_make_seeds <protocol corpus dir> <msgpack dir>.
// The output is checked in (tests/fuzz/corpus/protocol, tests/fuzz/corpus/msgpack).

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "shared/wire/msgpack.h"
#include "shared/wire/protocol.h"

namespace {

using namespace tessera::protocol;
namespace msgpack = tessera::msgpack;

void Write(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
}

template <typename T>
std::string Body(const T& m) {
  msgpack::Writer w;
  Pack(w, m);
  return w.bytes();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <protocol corpus dir> <msgpack corpus dir>\n", argv[0]);
    return 2;
  }
  const std::string proto = argv[1], raw = argv[2];

  Register reg;
  reg.name = "gpu-07";
  reg.hostname = "render-node-7.example";
  reg.version = "0.1.0";
  reg.cpu_cores = 32;
  reg.ram_mb = 262144;
  reg.gpus = {{0, "NVIDIA H200", 143771, 9, 0, "12.4", "12.4"}};
  reg.backends = {"cpu", "cuda"};
  reg.slots = 2;
  reg.pools = {"default", "gpu"};
  reg.tags = {"cuda12", "big-vram"};
  reg.running = {{41, 2}};
  reg.delivering = {{40, 1}};
  reg.plugins = {{"povray", "3.7", "/usr/bin/povray"}};
  PluginOffer native{"toon", "1.0", "/opt/toon.so"};
  native.native = true;
  native.description = "a toon shader";
  native.capabilities = {"tiles", "sample_parts"};
  native.declaration = "settings:\n  outline: {type: float, default: 1}\n";
  reg.plugins.push_back(native);
  reg.os = "Debian GNU/Linux 12 (bookworm)";
  reg.cpu_model = "AMD EPYC 7R32";
  reg.cloud = {"aws", "us-east-1", "us-east-1a", "g5.xlarge", "spot"};
  reg.features = {kFeatureAcksInAssign};
  Write(proto, "register", Body(reg));
  Register bad = reg;
  bad.hostname = "host\xff\xfe";
  bad.tags = {"ok", "t\xc3\x28"};
  Write(proto, "register-invalid-utf8", Body(bad));
  bad = reg;
  bad.tags.assign(kMaxListEntries + 1, "t");
  Write(proto, "register-too-many-tags", Body(bad));
  bad = reg;
  bad.name = std::string(kMaxNameBytes + 1, 'n');
  Write(proto, "register-long-name", Body(bad));

  Write(proto, "heartbeat", Body(Heartbeat{{{41, 2}, {42, 1}}, false, {{40, 1}}}));
  Heartbeat beat;
  beat.running = {{41, 2}};
  beat.delivering = {{40, 1}};
  GpuSample reading;
  reading.index = 1;
  reading.utilization_pct = 87;
  reading.memory_used_mb = 40000;
  reading.memory_total_mb = 81559;
  reading.temperature_c = 71;
  reading.power_w = 612.25;
  reading.last_xid = 79;
  reading.fault = "Xid 79: GPU has fallen off the bus";
  beat.gpu_samples = {reading, GpuSample{}};
  Write(proto, "heartbeat-gpu-samples", Body(beat));
  Write(proto, "progress", Body(Progress{41, 2, 0.5, "frame 3"}));
  Write(proto, "progress-invalid-utf8", Body(Progress{41, 2, 0.5, "frame \xed\xa0\x80"}));
  FrameResult fr{41, 2, 3, 64, 32, 4, 1.25, "cuda:0", {"R", "G", "B", "A"}, {0, 0, 64, 32, 0, 16}};
  fr.encoding = kEncodingAccumulation;
  Write(proto, "frame-result", Body(fr));
  Write(proto, "task-done", Body(TaskDone{41, 2, "rendered 3 frames\n"}));
  Write(proto, "task-failed", Body(TaskFailed{41, 2, "renderer exited 1", true, "log\xc0\xaf"}));
  Write(proto, "enrol", Body(Enrol{"gpu-07", std::string(40, 'a')}));
  Write(proto, "handback", Body(Handback{41, 2, 3, 128, "spot interruption", "log"}));
  Write(proto, "piece", Body(Piece{7, 1 << 20, 5 << 20}));
  Write(proto, "blob-request", Body(BlobRequest{std::string(64, 'f'), 0, 1 << 20}));
  Write(proto, "welcome", Body(Welcome{7, 1000, 5}));
  Write(proto, "reject", Body(Reject{"worker gpu-07 is connected from another peer", 4200}));
  Assign a;
  a.task_id = 41;
  a.attempt = 2;
  a.job_id = 9;
  a.frame_start = 1;
  a.frame_end = 4;
  a.scene_yaml = "camera:\n  keyframes: [{frame: 1, position: [0, 1, 5]}]\n";
  a.renderer = "povray";
  a.gpus = {0};
  a.part = {0, 0, 64, 64, 0, -1};
  a.scene_name = "shot.pov";
  a.settings = {{"quality", "9"}, {"antialias", "true"}};
  a.timeout_s = 600;
  a.resume_frame = 2;
  a.resume_checkpoint = std::string(64, 'c');
  a.assets = {{"textures/wood.png", std::string(64, 'd')}};
  a.output = {"/shared/out", "shot.####", {"exr", "png"}, true};
  a.acks = {{40, 1}};
  Write(proto, "assign", Body(a));
  Write(proto, "cancel", Body(Cancel{41, 2}));
  Write(proto, "enrolled", Body(Enrolled{"gpu-07"}));
  Write(proto, "result-ack", Body(ResultAck{41, 2}));
  Write(proto, "piece-ack", Body(PieceAck{7, 2 << 20, 0, ""}));
  Write(proto, "blob-data", Body(BlobData{std::string(64, 'f'), 0, 12, ""}));

  // Raw MessagePack: every width of every type the reader knows, and nesting at its limit.
  msgpack::Writer w;
  w.MapHeader(3);
  w.Str("ints");
  w.ArrayHeader(10);
  for (int64_t v :
       {int64_t{0}, int64_t{-1}, int64_t{-33}, int64_t{127}, int64_t{200}, int64_t{-200},
        int64_t{70000}, int64_t{-70000}, int64_t{1} << 40, -(int64_t{1} << 40)}) {
    w.Int(v);
  }
  w.Str("other");
  w.ArrayHeader(6);
  w.Uint(UINT64_MAX);
  w.Double(-0.5);
  w.Bool(true);
  w.Nil();
  w.Str(std::string(40, 's'));
  w.Str(std::string(300, 'l'));
  w.Str("map16");
  w.MapHeader(16);
  for (int i = 0; i < 16; ++i) {
    w.Str("k" + std::to_string(i));
    w.Int(i);
  }
  Write(raw, "widths", w.bytes());
  std::string nested(64, '\x91');
  nested += '\x01';
  Write(raw, "nested-64", nested);
  // bin 8, ext 8, fixext 4, float 32: skipped by the protocol's reader.
  Write(raw, "bin-ext-float",
        std::string("\x94\xc4\x02hi\xc7\x01\x05x\xd6\x01"
                    "abcd"
                    "\xca\x3f\x80\x00\x00",
                    20));
  Write(raw, "register", Body(reg));
  return 0;
}
