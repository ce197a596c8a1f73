#include "plugins/pathtracer/plugin_entry.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "plugins/pathtracer/kernel.h"
#include "plugins/pathtracer/renderer.h"
#include "shared/base/sha256.h"
#include "shared/base/utf8.h"
#include "shared/images/accumulation.h"
#include "shared/scenes/scene_file.h"

namespace tessera::pathtracer {

// The kernel sums samples in the farm's accumulation format (shared/images/rendered_image.h).
static_assert(kernel::kFixedScale == accumulation::kFixedScale);
static_assert(kernel::kNumSampleValues == accumulation::kMaxChannels);

namespace {

// Each frame is rendered in this many passes: a hand-back waits at most one pass.
constexpr int kPassesPerFrame = 16;
// More GPUs than a machine has: a bound on what a host's gpu_count can make us read.
constexpr int32_t kMaxGpus = 64;

// What an image handed to the host owns until free_image().
struct Owned {
  std::vector<float> pixels;
  std::string channel_names;
  std::string backend;
  std::string accumulation;
};

// The scenes this process parsed, by their text's SHA-256 and folder. A worker renders every frame
// of a job's tasks with the same scene (each task brings its text through the plugin ABI): it is
// parsed once, and kept while it is among the kScenes parsed last. Any thread may call Parsed.
class SceneCache {
 public:
  StatusOr<spec::SceneSpec> Parsed(std::string_view text, const std::string& dir) {
    const std::string key = Sha256Hex(text) + '\n' + dir;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const Entry& e : entries_) {
        if (e.key == key) return *e.scene;
      }
    }
    TSR_ASSIGN_OR_RETURN(spec::SceneSpec scene, spec::ParseSceneYaml(text, dir));
    std::lock_guard<std::mutex> lock(mu_);
    entries_.push_front({key, std::make_shared<const spec::SceneSpec>(scene)});
    if (entries_.size() > kScenes) entries_.pop_back();
    return scene;
  }

 private:
  static constexpr size_t kScenes = 8;
  struct Entry {
    std::string key;
    std::shared_ptr<const spec::SceneSpec> scene;
  };
  std::mutex mu_;
  std::deque<Entry> entries_;  // the most recent first
};

SceneCache& Scenes() {
  static SceneCache cache;
  return cache;
}

int Fail(const Status& status, char* error, uint64_t error_size) {
  // Messages quote paths and values from the scene: never hand the host invalid UTF-8.
  std::snprintf(error, error_size, "%s", utf8::Sanitize(status.message()).c_str());
  if (status.code() == StatusCode::kCancelled) return TSR_RENDER_CANCELLED;
  // A scene that does not parse, or names a mesh or texture that is missing or unreadable as
  // what it claims to be: every attempt would fail the same way.
  if (status.code() == StatusCode::kInvalidArgument || status.code() == StatusCode::kNotFound) {
    return TSR_RENDER_SCENE_ERROR;
  }
  return TSR_RENDER_FAILED;
}

void Log(const TsrRenderRequest& r, const std::string& line) {
  if (r.log != nullptr) r.log(r.host, line.c_str());
}

Backend BackendOf(const char* device) {
  const std::string_view d = device != nullptr ? device : "auto";
  if (d == "cpu") return Backend::kCpu;
  if (d == "cuda") return Backend::kCuda;
  return Backend::kAuto;
}

int Render(const TsrRenderRequest* r, TsrImage* out, char* error, uint64_t error_size) try {
  StatusOr<spec::SceneSpec> scene = Scenes().Parsed(std::string_view(r->scene, r->scene_size),
                                                    r->scene_dir != nullptr ? r->scene_dir : "");
  if (!scene.ok()) return Fail(scene.status().WithContext("scene"), error, error_size);
  if (r->settings_json != nullptr) {
    const nlohmann::json settings = nlohmann::json::parse(r->settings_json, nullptr, false);
    if (settings.is_object() && settings.contains(TSR_SETTING_INPUT_ROOTS)) {
      const nlohmann::json& roots = settings[TSR_SETTING_INPUT_ROOTS];
      scene->confine_inputs = true;
      if (roots.is_array()) {
        for (const nlohmann::json& root : roots) {
          if (root.is_string()) scene->input_roots.push_back(root.get<std::string>());
        }
      }
    }
  }

  RenderRequest request;
  request.frame = r->frame;
  // The task's GPUs: all of them from a 2.2 host, the first (or none: -1) from an older one.
  std::vector<int> gpus;
  if (TSR_ABI_MINOR(r->abi_version) >= 2) {
    if (r->gpus != nullptr && r->gpu_count > 0) {
      gpus.assign(r->gpus, r->gpus + std::min<int32_t>(r->gpu_count, kMaxGpus));
    }
    request.gpu_memory_mb = std::max<int64_t>(0, r->gpu_memory_mb);
  } else if (r->gpu_index >= 0) {
    gpus.push_back(r->gpu_index);
  }
  // A task without a GPU renders on the CPU: the worker's GPUs belong to other tasks.
  request.backend = gpus.empty() ? Backend::kCpu : BackendOf(r->device);
  request.gpu_index = gpus.empty() ? -1 : gpus.front();
  request.devices = gpus;
  request.cpu_threads = std::max(1, r->threads);
  bool handed_back = false;  // set on the rendering thread by on_pass
  request.cancelled = [r, &handed_back] { return handed_back || r->cancelled(r->host) != 0; };
  request.on_progress = [r](double fraction) { r->progress(r->host, fraction); };
  if (r->x1 > r->x0 && r->y1 > r->y0) request.region = PixelRegion{r->x0, r->y0, r->x1, r->y1};
  request.sample_begin = r->sample_begin;
  request.sample_end = r->sample_end;

  std::optional<RenderedImage> resume;
  if (r->resume != nullptr && r->resume_size > 0) {
    StatusOr<RenderedImage> parsed = accumulation::ParseAccumulation(
        std::string_view(static_cast<const char*>(r->resume), r->resume_size));
    if (parsed.ok() && parsed->frame == r->frame) {
      resume = std::move(*parsed);
      request.resume = &*resume;
      Log(*r, "resuming frame " + std::to_string(r->frame) + " from a checkpoint of " +
                  std::to_string(resume->sample_count) + " samples");
    } else {
      Log(*r,
          "checkpoint ignored (" +
              (parsed.ok() ? std::string("it is of another frame") : parsed.status().message()) +
              "); frame " + std::to_string(r->frame) + " starts over");
    }
  }
  // Progressive passes, so a hand-back can take a checkpoint at the next pass boundary (pass
  // sizes never change the pixels).
  request.pass_samples = std::max(1, scene->samples / kPassesPerFrame);
  // Periodic checkpoints (ABI 2.1 hosts): asked for between passes, the render going on. None
  // after the last pass: the frame itself follows at once.
  const bool periodic = TSR_ABI_MINOR(r->abi_version) >= 1 && r->checkpoint_requested != nullptr;
  const int sample_end = r->sample_end < 0 ? scene->samples : r->sample_end;
  request.on_pass = [r, &handed_back, periodic, sample_end](const RenderedImage& so_far) {
    if (handed_back) return;
    const auto give = [r, &so_far] {
      StatusOr<std::string> bytes = accumulation::SerializeAccumulation(so_far);
      if (bytes.ok() && r->checkpoint != nullptr) {
        r->checkpoint(r->host, bytes->data(), bytes->size(), so_far.sample_count);
      }
    };
    if (r->handback_requested != nullptr && r->handback_requested(r->host)) {
      give();
      handed_back = true;  // the render stops at once
    } else if (periodic && so_far.sample_begin + so_far.sample_count < sample_end &&
               r->checkpoint_requested(r->host)) {
      give();
    }
  };

  StatusOr<RenderedImage> image = RenderFrame(*scene, request);
  if (handed_back) return TSR_RENDER_HANDED_BACK;
  if (!image.ok()) return Fail(image.status(), error, error_size);

  auto owned = std::make_unique<Owned>();
  if (r->want_accumulation) {
    StatusOr<std::string> bytes = accumulation::SerializeAccumulation(*image);
    if (!bytes.ok()) return Fail(bytes.status(), error, error_size);
    owned->accumulation = std::move(*bytes);
  }
  for (const std::string& name : image->channel_names) {
    if (!owned->channel_names.empty()) owned->channel_names += ',';
    owned->channel_names += name;
  }
  owned->backend = image->backend;
  owned->pixels = std::move(image->pixels);
  out->width = image->width;
  out->height = image->height;
  out->channels = image->channels;
  out->pixels = owned->pixels.data();
  out->channel_names = owned->channel_names.c_str();
  out->backend = owned->backend.c_str();
  out->accumulation = owned->accumulation.empty() ? nullptr : owned->accumulation.data();
  out->accumulation_size = owned->accumulation.size();
  out->plugin_data = owned.release();
  return TSR_RENDER_OK;
} catch (const std::exception& e) {
  // An allocation for a huge image, or anything else thrown: an error, never an abort.
  return Fail(Status::Internal(std::string("render failed: ") + e.what()), error, error_size);
}

void FreeImage(TsrImage* image) {
  delete static_cast<Owned*>(image->plugin_data);
  *image = TsrImage{};
}

const TsrRendererPlugin kPlugin = {
    TSR_RENDERER_ABI_VERSION,
    "pathtracer",
    TESSERA_VERSION,
    "Tessera's built-in path tracer (CUDA, or the same kernel on the CPU); scene is inline YAML",
    TSR_CAP_TILES | TSR_CAP_SAMPLE_PARTS | TSR_CAP_CHECKPOINT | TSR_CAP_PERIODIC_CHECKPOINT,
    nullptr,
    &Render,
    &FreeImage,
};

}  // namespace
}  // namespace tessera::pathtracer

extern "C" const TsrRendererPlugin* tsr_pathtracer_plugin(void) {
  return &tessera::pathtracer::kPlugin;
}
