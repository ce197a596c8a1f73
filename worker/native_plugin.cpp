#include "worker/native_plugin.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <mutex>

#include "plugins/builtin_plugins.h"
#include "shared/base/utf8.h"
#include "shared/scenes/scene_file.h"

namespace tessera::worker {

StatusOr<std::unique_ptr<NativePlugin>> NativePlugin::Load(const std::string& path) {
  std::unique_ptr<NativePlugin> plugin(new NativePlugin());
  plugin->path_ = path;
  plugin->handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (plugin->handle_ == nullptr) {
    const char* why = ::dlerror();
    return Status::NotFound(path + ": cannot load: " + (why ? why : "unknown error"));
  }
  auto entry =
      reinterpret_cast<TsrRendererPluginEntry>(::dlsym(plugin->handle_, "tsr_renderer_plugin"));
  if (entry == nullptr) {
    return Status::InvalidArgument(path +
                                   ": not a Tessera renderer plugin (no "
                                   "tsr_renderer_plugin symbol)");
  }
  plugin->table_ = entry();
  TSR_RETURN_IF_ERROR(plugin->Check(path));
  return plugin;
}

StatusOr<std::unique_ptr<NativePlugin>> NativePlugin::FromTable(const TsrRendererPlugin* table,
                                                                const std::string& what) {
  std::unique_ptr<NativePlugin> plugin(new NativePlugin());
  plugin->table_ = table;
  TSR_RETURN_IF_ERROR(plugin->Check(what));
  return plugin;
}

Status NativePlugin::Check(const std::string& what) {
  if (table_ == nullptr) return Status::InvalidArgument(what + ": returned no plugin");
  if (table_->abi_version != TSR_RENDERER_ABI_VERSION) {
    return Status::FailedPrecondition(
        what + ": built for renderer ABI " + std::to_string(table_->abi_version) +
        ", this worker speaks " + std::to_string(TSR_RENDERER_ABI_VERSION) + "; rebuild it");
  }
  const TsrRendererPlugin& t = *table_;
  name_ = t.name ? t.name : "";
  version_ = utf8::Sanitize(t.version ? t.version : "");
  description_ = utf8::Sanitize(t.description ? t.description : "");
  declaration_ = t.declaration_yaml ? t.declaration_yaml : "";
  if (name_.empty() || name_.size() > 64 || !std::all_of(name_.begin(), name_.end(), [](char c) {
        return std::islower(static_cast<unsigned char>(c)) ||
               std::isdigit(static_cast<unsigned char>(c)) || c == '_';
      })) {
    return Status::InvalidArgument(what + ": plugin name '" + name_ +
                                   "' must be 1-64 lower-case letters, digits and '_'");
  }
  if (t.render == nullptr || t.free_image == nullptr) {
    return Status::InvalidArgument(what + ": render or free_image is missing");
  }
  return Status::Ok();
}

NativePlugin::~NativePlugin() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

std::vector<std::string> NativePlugin::CapabilityNames() const {
  std::vector<std::string> names;
  if (Can(TSR_CAP_TILES)) names.push_back("tiles");
  if (Can(TSR_CAP_SAMPLE_PARTS)) names.push_back("sample_parts");
  if (Can(TSR_CAP_CHECKPOINT)) names.push_back("checkpoint");
  if (Can(TSR_CAP_PERIODIC_CHECKPOINT)) names.push_back("periodic_checkpoint");
  return names;
}

namespace {

// The callbacks' view of one Render() call.
struct HostContext {
  const NativePlugin::Request* request;
  std::mutex mu;  // the plugin may call back from any of its threads
  bool checkpointed = false;
};
HostContext& Ctx(void* host) { return *static_cast<HostContext*>(host); }

void OnProgress(void* host, double fraction) {
  HostContext& ctx = Ctx(host);
  if (ctx.request->on_progress) ctx.request->on_progress(std::clamp(fraction, 0.0, 1.0));
}
int IsCancelled(void* host) {
  const std::atomic<bool>* cancel = Ctx(host).request->cancel;
  return cancel != nullptr && cancel->load() ? 1 : 0;
}
void OnLog(void* host, const char* line) {
  HostContext& ctx = Ctx(host);
  if (line == nullptr || !ctx.request->on_log) return;
  // A plugin's bytes: made valid UTF-8 where they enter the worker.
  const std::string clean = utf8::Sanitize(line);
  std::lock_guard<std::mutex> lock(ctx.mu);
  ctx.request->on_log(clean);
}
int HandbackRequested(void* host) {
  const std::atomic<bool>* handback = Ctx(host).request->handback;
  return handback != nullptr && handback->load() ? 1 : 0;
}
int CheckpointRequested(void* host) {
  const NativePlugin::Request& request = *Ctx(host).request;
  return request.checkpoint_due && request.checkpoint_due() ? 1 : 0;
}
void OnCheckpoint(void* host, const void* data, uint64_t size, int32_t samples_done) {
  HostContext& ctx = Ctx(host);
  std::lock_guard<std::mutex> lock(ctx.mu);
  if (data == nullptr) return;
  if (!HandbackRequested(host) && ctx.request->on_periodic_checkpoint) {
    // Asked for by checkpoint_requested(): the render goes on.
    ctx.request->on_periodic_checkpoint(std::string(static_cast<const char*>(data), size),
                                        samples_done);
    return;
  }
  if (ctx.checkpointed || !ctx.request->on_checkpoint) return;
  ctx.checkpointed = true;
  ctx.request->on_checkpoint(std::string(static_cast<const char*>(data), size), samples_done);
}

std::vector<std::string> SplitNames(const char* text) {
  std::vector<std::string> names;
  if (text == nullptr) return names;
  std::string_view rest(text);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    names.emplace_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return names;
}

}  // namespace

StatusOr<NativePlugin::Result> NativePlugin::Render(const Request& request) const {
  HostContext ctx{&request};
  TsrRenderRequest r{};
  r.abi_version = TSR_RENDERER_ABI_VERSION | TSR_RENDERER_ABI_MINOR << 16;
  r.frame = request.frame;
  r.x0 = request.part.x0;
  r.y0 = request.part.y0;
  r.x1 = request.part.x1;
  r.y1 = request.part.y1;
  r.sample_begin = request.part.sample_begin;
  r.sample_end = request.part.sample_end;
  r.threads = std::max(1, request.threads);
  r.gpu_index = request.gpu_index;
  const std::vector<int32_t> gpus(request.gpus.begin(), request.gpus.end());
  r.gpus = gpus.empty() ? nullptr : gpus.data();
  r.gpu_count = static_cast<int32_t>(gpus.size());
  r.gpu_memory_mb = request.gpu_memory_mb;
  r.device = request.device.c_str();
  r.scene = request.scene.data();
  r.scene_size = request.scene.size();
  r.scene_dir = request.scene_dir.c_str();
  r.settings_json = request.settings_json.c_str();
  r.resume = request.resume.empty() ? nullptr : request.resume.data();
  r.resume_size = request.resume.size();
  r.want_accumulation = request.want_accumulation ? 1 : 0;
  r.host = &ctx;
  r.progress = &OnProgress;
  r.cancelled = &IsCancelled;
  r.log = &OnLog;
  r.handback_requested = &HandbackRequested;
  r.checkpoint = &OnCheckpoint;
  if (Can(TSR_CAP_PERIODIC_CHECKPOINT) && request.checkpoint_due) {
    r.checkpoint_requested = &CheckpointRequested;
  }
  TsrImage out{};
  char error[1024] = {0};
  const int code = table_->render(&r, &out, error, sizeof(error));
  error[sizeof(error) - 1] = '\0';
  if (code == TSR_RENDER_HANDED_BACK) return Status::Cancelled("handed back");
  if (code != TSR_RENDER_OK) {
    if (code == TSR_RENDER_CANCELLED || IsCancelled(&ctx)) return Status::Cancelled("cancelled");
    if (code == TSR_RENDER_SCENE_ERROR) {
      return Status::InvalidArgument(name_ + ": " +
                                     (error[0] ? utf8::Sanitize(error) : "the scene is broken"));
    }
    return Status::Internal(name_ + ": " + (error[0] ? utf8::Sanitize(error) : "render failed"));
  }
  struct Release {
    const TsrRendererPlugin* t;
    TsrImage* img;
    ~Release() { t->free_image(img); }
  } release{table_, &out};
  const bool tile = !request.part.whole_region();
  if (out.width <= 0 || out.height <= 0 || out.channels <= 0 ||
      out.channels > protocol::kMaxChannels || out.pixels == nullptr ||
      out.width > spec::kMaxResolution || out.height > spec::kMaxResolution ||
      (tile && (out.width != request.part.x1 - request.part.x0 ||
                out.height != request.part.y1 - request.part.y0))) {
    return Status::Internal(name_ + ": returned a " + std::to_string(out.width) + "x" +
                            std::to_string(out.height) + "x" + std::to_string(out.channels) +
                            " image" + (tile ? " for a different tile size" : ""));
  }
  Result result;
  image::ImageBuffer& img = result.image;
  img.width = out.width;
  img.height = out.height;
  img.channels = out.channels;
  img.pixels.assign(out.pixels,
                    out.pixels + static_cast<size_t>(out.width) * out.height * out.channels);
  img.channel_names = SplitNames(out.channel_names);
  for (std::string& n : img.channel_names) utf8::SanitizeInPlace(n);
  if (img.channel_names.empty()) {
    const char* rgba[] = {"R", "G", "B", "A"};
    for (int c = 0; c < std::min(out.channels, 4); ++c) img.channel_names.push_back(rgba[c]);
  }
  if (static_cast<int>(img.channel_names.size()) != out.channels) {
    return Status::Internal(name_ + ": returned " + std::to_string(img.channel_names.size()) +
                            " channel names for " + std::to_string(out.channels) + " channels");
  }
  result.backend = utf8::Sanitize(out.backend != nullptr ? out.backend : name_);
  if (request.want_accumulation && out.accumulation != nullptr) {
    result.accumulation.assign(static_cast<const char*>(out.accumulation), out.accumulation_size);
  }
  return result;
}

const NativePlugin* FindNativePlugin(const NativePluginList& plugins, std::string_view name) {
  for (const auto& p : plugins) {
    if (p->name() == name) return p.get();
  }
  return nullptr;
}

std::shared_ptr<const NativePluginList> BuiltinNativePlugins() {
  static const std::shared_ptr<const NativePluginList> builtin = [] {
    NativePluginList list;
    for (const TsrRendererPlugin* table : plugins::BuiltinRendererPlugins()) {
      StatusOr<std::unique_ptr<NativePlugin>> plugin =
          NativePlugin::FromTable(table, "a built-in renderer plugin");
      TSR_CHECK(plugin.ok());
      list.push_back(std::move(*plugin));
    }
    return std::make_shared<const NativePluginList>(std::move(list));
  }();
  return builtin;
}

NativePluginList LoadNativePlugins(const std::vector<std::string>& paths) {
  NativePluginList plugins = *BuiltinNativePlugins();
  for (const std::string& path : paths) {
    StatusOr<std::unique_ptr<NativePlugin>> loaded = NativePlugin::Load(path);
    if (!loaded.ok()) {
      spdlog::error("renderer plugin {}: {}; not offered", path, loaded.status().message());
      continue;
    }
    if (FindNativePlugin(plugins, (*loaded)->name()) != nullptr) {
      spdlog::error("renderer plugin {}: another plugin is already named {}; not offered", path,
                    (*loaded)->name());
      continue;
    }
    spdlog::info("renderer plugin {} {} loaded from {}", (*loaded)->name(), (*loaded)->version(),
                 path);
    plugins.push_back(std::move(*loaded));
  }
  return plugins;
}

}  // namespace tessera::worker
