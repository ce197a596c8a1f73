#pragma once
// Test support: an OpenAPI 3.0 document (docs/openapi.yaml) as a checker of the real API. It
// maps a request path to the document's path template, tells the cpp-httplib route pattern a
// template stands for, and validates a response (status, media type, JSON body) against the
// operation's schema.
//
// The validator covers the subset of JSON Schema the document uses: type (integer is not
// number), nullable, enum, properties, required, additionalProperties (false or a schema),
// items, $ref to #/components/..., oneOf, minimum/maximum, minLength/maxLength, pattern, and
// format date-time. A keyword it does not know is itself a mismatch, so the document cannot
// silently ask for something that is never checked.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "shared/base/status.h"

namespace tessera::testing {

// A YAML file as JSON. Plain scalars follow YAML 1.2's core schema (null, true/false,
// integers, floats, else text); quoted and block scalars are always text.
StatusOr<nlohmann::json> LoadYamlAsJson(const std::string& path);

class OpenApi {
 public:
  static StatusOr<OpenApi> Load(const std::string& path);

  const nlohmann::json& doc() const { return doc_; }
  // Follows a {"$ref": "#/..."} (repeatedly); anything else comes back as it is.
  const nlohmann::json& Resolve(const nlohmann::json& node) const;

  // The cpp-httplib route the server registers for a path template: each {param} becomes a
  // group holding the parameter's x-tessera-route-group, or [^/]+.
  std::string RoutePattern(const std::string& path_template) const;
  // The template whose route matches `path` (no query string); empty when none does.
  std::string FindPath(const std::string& path) const;
  // The operation object of (template, lower-case method); null when not documented.
  const nlohmann::json* Operation(const std::string& path_template,
                                  const std::string& method) const;

  // What is wrong with a response to `method` `path_template`: a status the operation does not
  // document, a media type its response does not list, a JSON body that does not parse or
  // does not conform. Empty: it conforms.
  std::vector<std::string> CheckResponse(const std::string& path_template,
                                         const std::string& method, int status,
                                         const std::string& content_type,
                                         const std::string& body) const;

  // Every mismatch of `value` against `schema`, each starting with its JSON path (`where`).
  std::vector<std::string> Validate(const nlohmann::json& value, const nlohmann::json& schema,
                                    const std::string& where = "$") const;

  // Problems of the document itself: $refs that lead nowhere, schema keywords the validator
  // does not know, duplicate operationIds.
  std::vector<std::string> SelfCheck() const;

 private:
  explicit OpenApi(nlohmann::json doc) : doc_(std::move(doc)) {}
  void Check(const nlohmann::json& value, const nlohmann::json& schema, const std::string& where,
             std::vector<std::string>& out) const;
  void CheckSchema(const nlohmann::json& schema, const std::string& where,
                   std::vector<std::string>& out) const;

  nlohmann::json doc_;
};

}  // namespace tessera::testing
