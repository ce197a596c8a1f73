#include <filesystem>
#include <nlohmann/json.hpp>

#include "scheduler/api/http_api.h"
#include "scheduler/api/reply.h"
#include "scheduler/blobs/blob_store.h"

namespace tessera::api {

namespace fs = std::filesystem;
using nlohmann::json;
using security::Caller;
using security::Role;

void HttpApi::BlobRoutes() {
  // Content-addressed job assets, uploaded in resumable pieces.
  Handle("GET", "/api/v1/blobs/([0-9a-f]{64})", Role::kSubmitter,
         [this](Req req, Res res, const Caller&) {
           if (options_.blobs == nullptr) {
             return ReplyError(res, Status::Unavailable("this scheduler keeps no blobs"));
           }
           const std::string hash = req.matches[1];
           if (StatusOr<int64_t> size = options_.blobs->Size(hash); size.ok()) {
             return Reply(res, 200, {{"hash", hash}, {"complete", true}, {"size", *size}});
           }
           Reply(
               res, 200,
               {{"hash", hash}, {"complete", false}, {"received", options_.blobs->Received(hash)}});
         });
  Handle(
      "PUT", "/api/v1/blobs/([0-9a-f]{64})", Role::kSubmitter,
      [this](Req req, Res res, const Caller&) {
        if (options_.blobs == nullptr) {
          return ReplyError(res, Status::Unavailable("this scheduler keeps no blobs"));
        }
        const std::string hash = req.matches[1];
        std::optional<int64_t> offset = WholeNumber(req.Param("offset"));
        std::optional<int64_t> total = WholeNumber(req.Param("total"));
        if (!offset) {
          return ReplyError(res, Status::InvalidArgument("offset: required, a whole number"));
        }
        if (!total) {
          return ReplyError(res, Status::InvalidArgument("total: required, a whole number"));
        }
        if (Status floor = CheckDataFloor(); !floor.ok()) {
          return ReplyError(res, Status::StorageFull("uploads are refused: " + floor.message()));
        }
        StatusOr<blobs::BlobStore::Progress> progress =
            options_.blobs->Write(hash, *offset, *total, req.body);
        if (!progress.ok()) return ReplyError(res, progress.status());
        Reply(res, progress->complete ? 201 : 200,
              {{"hash", hash}, {"complete", progress->complete}, {"received", progress->received}});
      });
}

}  // namespace tessera::api
