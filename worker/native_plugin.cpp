#include "worker/native_plugin.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>

namespace tessera::worker {

StatusOr<std::unique_ptr<NativePlugin>> NativePlugin::Load(const std::string& path) {
  std::unique_ptr<NativePlugin> plugin(new NativePlugin());
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
  if (plugin->table_ == nullptr) return Status::InvalidArgument(path + ": returned no plugin");
  if (plugin->table_->abi_version != TSR_RENDERER_ABI_VERSION) {
    return Status::FailedPrecondition(
        path + ": built for renderer ABI " + std::to_string(plugin->table_->abi_version) +
        ", this worker speaks " + std::to_string(TSR_RENDERER_ABI_VERSION) + "; rebuild it");
  }
  const TsrRendererPlugin& t = *plugin->table_;
  plugin->name_ = t.name ? t.name : "";
  plugin->version_ = t.version ? t.version : "";
  if (plugin->name_.empty() || !std::all_of(plugin->name_.begin(), plugin->name_.end(), [](char c) {
        return std::islower(static_cast<unsigned char>(c)) ||
               std::isdigit(static_cast<unsigned char>(c)) || c == '_';
      })) {
    return Status::InvalidArgument(path + ": plugin name '" + plugin->name_ +
                                   "' must be lower-case letters, digits and '_'");
  }
  if (t.render == nullptr || t.free_image == nullptr) {
    return Status::InvalidArgument(path + ": render or free_image is missing");
  }
  return plugin;
}

NativePlugin::~NativePlugin() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

namespace {
struct HostContext {
  const NativePlugin::Request* request;
};
void OnProgress(void* host, double fraction) {
  auto* ctx = static_cast<HostContext*>(host);
  if (ctx->request->on_progress) ctx->request->on_progress(std::clamp(fraction, 0.0, 1.0));
}
int IsCancelled(void* host) {
  auto* ctx = static_cast<HostContext*>(host);
  return ctx->request->cancel != nullptr && ctx->request->cancel->load() ? 1 : 0;
}
}  // namespace

StatusOr<image::ImageBuffer> NativePlugin::Render(const Request& request) const {
  HostContext ctx{&request};
  TsrRenderRequest r{};
  r.abi_version = TSR_RENDERER_ABI_VERSION;
  r.frame = request.frame;
  r.x0 = request.part.x0;
  r.y0 = request.part.y0;
  r.x1 = request.part.x1;
  r.y1 = request.part.y1;
  r.sample_begin = request.part.sample_begin;
  r.sample_end = request.part.sample_end;
  r.threads = std::max(1, request.threads);
  r.gpu_index = request.gpu_index;
  r.scene = request.scene.data();
  r.scene_size = request.scene.size();
  r.settings_json = request.settings_json.c_str();
  r.host = &ctx;
  r.progress = &OnProgress;
  r.cancelled = &IsCancelled;
  TsrImage out{};
  char error[1024] = {0};
  if (table_->render(&r, &out, error, sizeof(error)) != 0) {
    error[sizeof(error) - 1] = '\0';
    if (IsCancelled(&ctx)) return Status::Cancelled("cancelled");
    return Status::Internal(name_ + ": " + (error[0] ? error : "render failed"));
  }
  struct Release {
    const TsrRendererPlugin* t;
    TsrImage* img;
    ~Release() { t->free_image(img); }
  } release{table_, &out};
  const bool tile = !request.part.whole_region();
  if (out.width <= 0 || out.height <= 0 || out.channels <= 0 ||
      out.channels > protocol::kMaxChannels || out.pixels == nullptr ||
      (tile && (out.width != request.part.x1 - request.part.x0 ||
                out.height != request.part.y1 - request.part.y0))) {
    return Status::Internal(name_ + ": returned a " + std::to_string(out.width) + "x" +
                            std::to_string(out.height) + "x" + std::to_string(out.channels) +
                            " image" + (tile ? " for a different tile size" : ""));
  }
  image::ImageBuffer img;
  img.width = out.width;
  img.height = out.height;
  img.channels = out.channels;
  img.pixels.assign(out.pixels,
                    out.pixels + static_cast<size_t>(out.width) * out.height * out.channels);
  return img;
}

}  // namespace tessera::worker
