#include "tests/support/openapi.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <regex>
#include <set>

namespace tessera::testing {

using nlohmann::json;

namespace {

const json kMissing = nullptr;

// node[key], or null (which iterates as empty) when absent. Unlike json::value(key, default)
// this returns a reference, so a range-for over its items() does not outlive a temporary.
const json& Member(const json& node, const char* key) {
  return node.is_object() && node.contains(key) ? node[key] : kMissing;
}

json ScalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted or block scalar: always text
  static const std::regex kInt(R"([-+]?[0-9]+)");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    return nullptr;
  }
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  try {
    if (std::regex_match(text, kInt)) return std::stoll(text);
    if (std::regex_match(text, kFloat)) return std::stod(text);
  } catch (const std::exception&) {
    // Out of range: keep the text.
  }
  return text;
}

json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return ScalarToJson(node);
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const YAML::Node& item : node) out.push_back(ToJson(item));
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& entry : node) out[entry.first.Scalar()] = ToJson(entry.second);
      return out;
    }
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return nullptr;
}

std::string TypeName(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

bool HasType(const json& v, const std::string& type) {
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "array") return v.is_array();
  if (type == "object") return v.is_object();
  return false;
}

// What the validator understands; annotations it may ignore.
const std::set<std::string> kSchemaKeywords = {
    "type",    "format",  "nullable", "enum",    "properties",  "required",
    "items",   "oneOf",   "minimum",  "maximum", "minLength",   "maxLength",
    "pattern", "default", "example",  "title",   "description", "additionalProperties",
    "$ref"};
const std::set<std::string> kMethods = {"get",   "put",  "post",    "delete",
                                        "patch", "head", "options", "trace"};

std::string Joined(const json& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : ", ") + v.dump();
  return out;
}

// The names of the {params} of a path template, in order.
std::vector<std::string> TemplateParams(const std::string& path_template) {
  std::vector<std::string> out;
  static const std::regex kParam(R"(\{([^}]+)\})");
  for (std::sregex_iterator it(path_template.begin(), path_template.end(), kParam), end; it != end;
       ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

}  // namespace

StatusOr<json> LoadYamlAsJson(const std::string& path) {
  try {
    return ToJson(YAML::LoadFile(path));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(path + ": " + e.what());
  }
}

StatusOr<OpenApi> OpenApi::Load(const std::string& path) {
  TSR_ASSIGN_OR_RETURN(json doc, LoadYamlAsJson(path));
  if (!doc.is_object() || !doc.contains("paths") || !doc["paths"].is_object()) {
    return Status::InvalidArgument(path + ": not an OpenAPI document (no paths)");
  }
  return OpenApi(std::move(doc));
}

const json& OpenApi::Resolve(const json& node) const {
  const json* at = &node;
  for (int hops = 0; at->is_object() && at->contains("$ref"); ++hops) {
    const json& ref = (*at)["$ref"];
    if (hops > 16 || !ref.is_string() || ref.get<std::string>().rfind("#/", 0) != 0) {
      return kMissing;
    }
    const json::json_pointer pointer(ref.get<std::string>().substr(1));
    if (!doc_.contains(pointer)) return kMissing;
    at = &doc_.at(pointer);
  }
  return *at;
}

std::string OpenApi::RoutePattern(const std::string& path_template) const {
  // Path parameters may be declared on the path item or on its operations.
  std::vector<json> params;
  if (doc_["paths"].contains(path_template)) {
    const json& item = doc_["paths"][path_template];
    for (const auto& p : Member(item, "parameters")) params.push_back(Resolve(p));
    for (const auto& [key, op] : item.items()) {
      if (!kMethods.count(key)) continue;
      for (const auto& p : Member(op, "parameters")) params.push_back(Resolve(p));
    }
  }
  std::string out;
  for (size_t i = 0; i < path_template.size(); ++i) {
    const char c = path_template[i];
    if (c == '{') {
      const size_t close = path_template.find('}', i);
      const std::string name = path_template.substr(i + 1, close - i - 1);
      std::string group = "[^/]+";
      for (const json& p : params) {
        if (p.value("in", "") == "path" && p.value("name", "") == name) {
          group = p.value("x-tessera-route-group", group);
        }
      }
      out += "(" + group + ")";
      i = close;
    } else {
      if (std::string_view(".^$|?*+()[]\\").find(c) != std::string_view::npos) out += '\\';
      out += c;
    }
  }
  return out;
}

std::string OpenApi::FindPath(const std::string& path) const {
  for (const auto& [path_template, item] : doc_["paths"].items()) {
    if (std::regex_match(path, std::regex(RoutePattern(path_template)))) return path_template;
  }
  return "";
}

const json* OpenApi::Operation(const std::string& path_template, const std::string& method) const {
  const json& paths = doc_["paths"];
  if (!paths.contains(path_template) || !paths[path_template].contains(method)) return nullptr;
  return &paths[path_template][method];
}

std::vector<std::string> OpenApi::CheckResponse(const std::string& path_template,
                                                const std::string& method, int status,
                                                const std::string& content_type,
                                                const std::string& body) const {
  std::string label = method + " " + path_template;
  std::transform(label.begin(), label.begin() + method.size(), label.begin(), ::toupper);
  const json* op = Operation(path_template, method);
  if (!op) return {label + ": not in the document"};
  label += " -> " + std::to_string(status);
  const json& responses = (*op)["responses"];
  if (!responses.contains(std::to_string(status))) {
    std::string documented;
    for (const auto& [code, unused] : responses.items()) documented += " " + code;
    return {label + ": this status is not documented (documented:" + documented + ")"};
  }
  const json& response = Resolve(responses[std::to_string(status)]);
  if (!response.contains("content")) {
    if (body.empty()) return {};
    return {label + ": the document says no body, the server sent " + content_type};
  }
  std::string media = content_type.substr(0, content_type.find(';'));
  media.erase(media.find_last_not_of(" \t") + 1);
  const json& content = response["content"];
  if (!content.contains(media)) {
    std::string documented;
    for (const auto& [type, unused] : content.items()) documented += " " + type;
    return {label + ": media type '" + media + "' is not documented (documented:" + documented +
            ")"};
  }
  if (media != "application/json") return {};
  const json value = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return {label + ": the body is not JSON: " + body.substr(0, 200)};
  std::vector<std::string> out;
  for (std::string& problem : Validate(value, Member(content[media], "schema"))) {
    out.push_back(label + ": " + problem);
  }
  return out;
}

std::vector<std::string> OpenApi::Validate(const json& value, const json& schema,
                                           const std::string& where) const {
  std::vector<std::string> out;
  Check(value, schema, where, out);
  return out;
}

void OpenApi::Check(const json& value, const json& schema_or_ref, const std::string& where,
                    std::vector<std::string>& out) const {
  const json& schema = Resolve(schema_or_ref);
  if (!schema.is_object()) {
    out.push_back(where + ": the schema (" + schema_or_ref.dump() + ") leads nowhere");
    return;
  }
  for (const auto& [key, unused] : schema.items()) {
    if (!kSchemaKeywords.count(key) && key.rfind("x-", 0) != 0) {
      out.push_back(where + ": the validator does not support the schema keyword '" + key + "'");
    }
  }
  if (value.is_null()) {
    if (!schema.value("nullable", false)) out.push_back(where + ": null, but it is not nullable");
    return;
  }
  if (schema.contains("oneOf")) {
    int matched = 0;
    for (const json& option : schema["oneOf"]) matched += Validate(value, option, where).empty();
    if (matched != 1) {
      out.push_back(where + ": matches " + std::to_string(matched) +
                    " of the oneOf schemas, not 1");
    }
  }
  if (schema.contains("type")) {
    const std::string type = schema["type"];
    if (!HasType(value, type)) {
      out.push_back(where + ": expected " + type + ", got " + TypeName(value) + " " +
                    value.dump().substr(0, 80));
      return;
    }
  }
  if (schema.contains("enum") &&
      std::find(schema["enum"].begin(), schema["enum"].end(), value) == schema["enum"].end()) {
    out.push_back(where + ": " + value.dump() + " is not one of " + Joined(schema["enum"]));
  }
  if (value.is_number()) {
    if (schema.contains("minimum") && value.get<double>() < schema["minimum"].get<double>()) {
      out.push_back(where + ": " + value.dump() + " is below the minimum " +
                    schema["minimum"].dump());
    }
    if (schema.contains("maximum") && value.get<double>() > schema["maximum"].get<double>()) {
      out.push_back(where + ": " + value.dump() + " is above the maximum " +
                    schema["maximum"].dump());
    }
  }
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (schema.contains("minLength") && text.size() < schema["minLength"].get<size_t>()) {
      out.push_back(where + ": shorter than " + schema["minLength"].dump());
    }
    if (schema.contains("maxLength") && text.size() > schema["maxLength"].get<size_t>()) {
      out.push_back(where + ": longer than " + schema["maxLength"].dump());
    }
    if (schema.contains("pattern") &&
        !std::regex_search(text, std::regex(schema["pattern"].get<std::string>()))) {
      out.push_back(where + ": " + value.dump() + " does not match " + schema["pattern"].dump());
    }
    static const std::regex kDateTime(
        R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2}))");
    if (schema.value("format", "") == "date-time" && !std::regex_match(text, kDateTime)) {
      out.push_back(where + ": " + value.dump() + " is not a date-time");
    }
  }
  if (value.is_object()) {
    for (const auto& name : Member(schema, "required")) {
      if (!value.contains(name.get<std::string>())) {
        out.push_back(where + ": the required property '" + name.get<std::string>() +
                      "' is missing");
      }
    }
    const json& properties = schema.contains("properties") ? schema["properties"] : kMissing;
    const json& additional =
        schema.contains("additionalProperties") ? schema["additionalProperties"] : kMissing;
    for (const auto& [key, item] : value.items()) {
      if (properties.is_object() && properties.contains(key)) {
        Check(item, properties[key], where + "." + key, out);
      } else if (additional.is_boolean() && !additional.get<bool>()) {
        out.push_back(where + ": unexpected property '" + key + "'");
      } else if (additional.is_object()) {
        Check(item, additional, where + "." + key, out);
      }
    }
  }
  if (value.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < value.size(); ++i) {
      Check(value[i], schema["items"], where + "[" + std::to_string(i) + "]", out);
    }
  }
}

void OpenApi::CheckSchema(const json& schema, const std::string& where,
                          std::vector<std::string>& out) const {
  if (!schema.is_object()) {
    out.push_back(where + ": a schema must be an object");
    return;
  }
  if (schema.contains("$ref")) {
    if (Resolve(schema).is_null()) out.push_back(where + ": $ref " + schema["$ref"].dump());
    // OpenAPI 3.0 ignores whatever stands beside a $ref: say so rather than mislead.
    for (const auto& [key, unused] : schema.items()) {
      if (key != "$ref" && key != "description") {
        out.push_back(where + ": '" + key + "' beside a $ref is ignored");
      }
    }
    return;
  }
  for (const auto& [key, unused] : schema.items()) {
    if (!kSchemaKeywords.count(key) && key.rfind("x-", 0) != 0) {
      out.push_back(where + ": schema keyword '" + key + "' is not supported by the validator");
    }
  }
  static const std::set<std::string> kTypes = {"integer", "number", "string",
                                               "boolean", "array",  "object"};
  if (schema.contains("type") &&
      (!schema["type"].is_string() || !kTypes.count(schema["type"].get<std::string>()))) {
    out.push_back(where + ": unknown type " + schema["type"].dump());
  }
  for (const auto& [key, property] : Member(schema, "properties").items()) {
    CheckSchema(property, where + ".properties." + key, out);
  }
  for (const auto& name : Member(schema, "required")) {
    if (!Member(schema, "properties").contains(name.get<std::string>())) {
      out.push_back(where + ": required '" + name.get<std::string>() + "' is not a property");
    }
  }
  if (schema.contains("items")) CheckSchema(schema["items"], where + ".items", out);
  if (schema.contains("additionalProperties") && schema["additionalProperties"].is_object()) {
    CheckSchema(schema["additionalProperties"], where + ".additionalProperties", out);
  }
  for (size_t i = 0; i < Member(schema, "oneOf").size(); ++i) {
    CheckSchema(schema["oneOf"][i], where + ".oneOf[" + std::to_string(i) + "]", out);
  }
}

std::vector<std::string> OpenApi::SelfCheck() const {
  std::vector<std::string> out;
  // Every $ref anywhere resolves.
  std::function<void(const json&, const std::string&)> refs = [&](const json& node,
                                                                  const std::string& where) {
    if (node.is_object()) {
      if (node.contains("$ref") && Resolve(node).is_null()) {
        out.push_back(where + ": $ref " + node["$ref"].dump() + " leads nowhere");
      }
      for (const auto& [key, child] : node.items()) refs(child, where + "/" + key);
    } else if (node.is_array()) {
      for (size_t i = 0; i < node.size(); ++i) refs(node[i], where + "/" + std::to_string(i));
    }
  };
  refs(doc_, "#");
  for (const auto& [name, schema] : Member(Member(doc_, "components"), "schemas").items()) {
    CheckSchema(schema, "#/components/schemas/" + name, out);
  }
  std::set<std::string> operation_ids;
  for (const auto& [path_template, item] : doc_["paths"].items()) {
    std::vector<json> params;
    for (const auto& p : Member(item, "parameters")) params.push_back(Resolve(p));
    for (const auto& [method, op] : item.items()) {
      if (!kMethods.count(method)) continue;
      const std::string label = method + " " + path_template;
      const std::string id = op.value("operationId", "");
      if (id.empty() || !operation_ids.insert(id).second) {
        out.push_back(label + ": operationId '" + id + "' is missing or not unique");
      }
      std::vector<json> all = params;
      for (const auto& p : Member(op, "parameters")) all.push_back(Resolve(p));
      for (const json& p : all) {
        if (p.contains("schema")) CheckSchema(p["schema"], label + " parameter", out);
      }
      for (const std::string& name : TemplateParams(path_template)) {
        const bool declared = std::any_of(all.begin(), all.end(), [&](const json& p) {
          return p.value("in", "") == "path" && p.value("name", "") == name &&
                 p.value("required", false);
        });
        if (!declared) out.push_back(label + ": path parameter {" + name + "} is not declared");
      }
      for (const auto& [status, response] : Member(op, "responses").items()) {
        for (const auto& [media, body] : Member(Resolve(response), "content").items()) {
          if (body.contains("schema")) {
            CheckSchema(body["schema"], label + " " + status + " " + media, out);
          }
        }
      }
    }
  }
  return out;
}

}  // namespace tessera::testing
