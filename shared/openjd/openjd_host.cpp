// Host requirements of OpenJD steps (spec 3.3) as what a Tessera step asks of its workers
// (shared/openjd/openjd_internal.h):
//   amount.worker.vcpu / memory (MiB) / gpu / gpu.memory (MiB)  -> resources, ceil(min) of each
//   amount.custom.<name> (and amount.<name>...)                 -> the farm's named limit
//                                                                   <name>, ceil(min) held
//   attr.worker.os.family                                       -> must allow linux
//   attr.worker.cpu.arch, attr.custom.<name> values             -> tags (lower case): allOf each,
//                                                                   anyOf one of them ("a|b")
// Names and values are format strings of the template scope, checked once resolved: a name
// reserved by the spec (amount.worker.*, attr.worker.* beyond those above; the job, step and task
// scopes), one given twice (in any case), or a value that is no <AttributeCapabilityValue> is
// refused naming the field. What Tessera cannot reserve (amount.worker.disk.scratch, vendor
// amounts) is refused by name, never ignored.

#include <algorithm>
#include <climits>
#include <cmath>
#include <set>

#include "shared/base/yaml_util.h"
#include "shared/openjd/openjd_internal.h"

namespace tessera::openjd::internal {

namespace {

constexpr size_t kMaxHostRequirements = 50;
constexpr size_t kMaxAttributeValues = 50;
constexpr size_t kMaxCapabilityChars = 100;

const std::set<std::string> kWorkerAmounts = {"amount.worker.vcpu", "amount.worker.memory",
                                              "amount.worker.gpu", "amount.worker.gpu.memory",
                                              "amount.worker.disk.scratch"};
const std::set<std::string> kWorkerAttributes = {"attr.worker.os.family", "attr.worker.cpu.arch"};
const std::set<std::string> kReservedScopes = {"worker", "job", "step", "task"};

// An <Identifier>'s characters; in a capability name only the whole name's length is bounded.
bool IsNamePart(const std::string& part) {
  return !part.empty() && (IsLatinAlpha(part[0]) || part[0] == '_') &&
         std::all_of(part.begin(), part.end(),
                     [](char c) { return IsLatinAlpha(c) || IsDigit(c) || c == '_'; });
}

// [<Identifier>:]<kind>.<Identifier>[.<Identifier>]* (spec 3.3.1.1, 3.3.2.1), lower-cased.
// `*vendor`: whether it had a vendor prefix; `*scope`: the identifier after "<kind>.".
bool IsCapabilityName(const std::string& name, const std::string& kind, bool* vendor,
                      std::string* scope) {
  if (name.empty() || CharCount(name) > kMaxCapabilityChars) return false;
  std::string rest = name;
  const size_t colon = rest.find(':');
  *vendor = colon != std::string::npos;
  if (*vendor) {
    if (!IsNamePart(rest.substr(0, colon))) return false;
    rest = rest.substr(colon + 1);
  }
  if (rest.rfind(kind + ".", 0) != 0) return false;
  rest = rest.substr(kind.size() + 1);
  *scope = rest.substr(0, rest.find('.'));
  size_t start = 0;
  while (true) {
    const size_t dot = rest.find('.', start);
    if (!IsNamePart(rest.substr(start, dot == std::string::npos ? dot : dot - start))) {
      return false;
    }
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// An amount's or attribute's name (`kind` "amount" or "attr"): bound in the template scope, then
// (once resolved) checked, lower-cased, and not given twice in one list (`seen`). Returns "" while
// its value is not known (checking a template).
StatusOr<std::string> CapabilityName(const YAML::Node& node, const std::string& kind,
                                     const std::string& field, const TemplateContext& ctx,
                                     std::set<std::string>* seen) {
  const std::string nfield = field + ".name";
  TSR_ASSIGN_OR_RETURN(std::string raw, Scalar(node, nfield));
  TSR_ASSIGN_OR_RETURN(FormatString format, BindFormat(raw, ctx.TemplateScope(), nfield));
  if (!IsResolved(format)) return std::string();
  const std::string name = LiteralText(format);
  const std::string lname = Lower(name);
  bool vendor = false;
  std::string scope;
  if (!IsCapabilityName(lname, kind, &vendor, &scope)) {
    return Status::InvalidArgument(
        nfield + ": '" + name + "' is not " + (kind == "amount" ? "an amount" : "an attribute") +
        " name ([vendor:]" + kind + ".<identifier>[.<identifier>]..., at most 100 characters)");
  }
  const std::set<std::string>& standard = kind == "amount" ? kWorkerAmounts : kWorkerAttributes;
  if (!vendor && kReservedScopes.count(scope) && !standard.count(lname)) {
    return Status::InvalidArgument(nfield + ": '" + name + "' is in the scope " + kind + "." +
                                   scope + ", which the specification reserves (" +
                                   (kind == "amount" ? "amount.worker.vcpu, memory, gpu, "
                                                       "gpu.memory, disk.scratch"
                                                     : "attr.worker.os.family, cpu.arch") +
                                   " are defined)");
  }
  if (!seen->insert(lname).second) {
    return Status::InvalidArgument(nfield + ": " + name + " is given twice");
  }
  return lname;
}

bool IsAttributeValue(const std::string& value) {
  return !value.empty() && value.size() <= kMaxCapabilityChars &&
         (IsLatinAlpha(value[0]) || value[0] == '_') &&
         std::all_of(value.begin(), value.end(),
                     [](char c) { return IsLatinAlpha(c) || IsDigit(c) || c == '_' || c == '-'; });
}

Status ReadAmount(const YAML::Node& node, const std::string& field, const TemplateContext& ctx,
                  std::set<std::string>* seen, HostNeeds* needs) {
  yaml::MapReader a(node, field);
  double min = 0, max = 0;
  const YAML::Node name_node = a.Child("name");
  a.Optional("min", &min).Optional("max", &max);
  if (a.ok() && !name_node.IsDefined()) {
    a.Fail(Status::InvalidArgument(field + ".name: required field is missing"));
  }
  TSR_RETURN_IF_ERROR(a.Finish());
  if (!a.Has("min") && !a.Has("max")) return Status::InvalidArgument(field + ": needs min or max");
  if (min < 0) return Status::InvalidArgument(field + ".min: must be 0 or more");
  if (a.Has("max") && max <= 0) return Status::InvalidArgument(field + ".max: must be positive");
  if (a.Has("max") && max < min) return Status::InvalidArgument(field + ": min is above max");
  TSR_ASSIGN_OR_RETURN(const std::string name,
                       CapabilityName(name_node, "amount", field, ctx, seen));
  if (name.empty()) return Status::Ok();
  const double reserve = std::ceil(min);
  // Tessera reserves whole units, exactly ceil(min) of them, for each task: a max at or above
  // that holds; one below it cannot be met.
  if (a.Has("max") && max < reserve) {
    return Status::InvalidArgument(field + ": " + name + " max " + std::to_string(max) +
                                   " cannot be expressed: Tessera reserves whole units, " +
                                   std::to_string(static_cast<int64_t>(reserve)) +
                                   " (min rounded up), for each task");
  }
  if (reserve > static_cast<double>(INT_MAX)) {
    return Status::InvalidArgument(field + ".min: more than any worker has");
  }
  spec::ResourceSpec& res = needs->resources;
  if (name == "amount.worker.vcpu") {
    res.cpu_cores = static_cast<int>(reserve);
  } else if (name == "amount.worker.memory") {
    res.ram_mb = static_cast<int64_t>(reserve);
  } else if (name == "amount.worker.gpu") {
    res.gpus = static_cast<int>(reserve);
  } else if (name == "amount.worker.gpu.memory") {
    res.gpu_memory_mb = static_cast<int64_t>(reserve);
  } else if (name == "amount.worker.disk.scratch") {
    return Status::InvalidArgument(field + ".name: " + name +
                                   " is not supported (Tessera does not reserve scratch disk)");
  } else if (name.find(':') != std::string::npos) {
    return Status::InvalidArgument(field + ".name: vendor amount " + name +
                                   " is not supported (custom amounts are amount.custom.<name>, "
                                   "the farm's named limits)");
  } else {
    // A farm-wide count, like licences: the farm's named limit, held ceil(min) times.
    std::string limit = name.substr(std::string("amount.").size());
    if (limit.rfind("custom.", 0) == 0) limit = limit.substr(std::string("custom.").size());
    if (reserve > static_cast<double>(spec::kMaxLabels)) {
      return Status::InvalidArgument(field + ".min: a task holds at most " +
                                     std::to_string(spec::kMaxLabels) + " of the limit " + limit);
    }
    for (int i = 0; i < static_cast<int>(reserve); ++i) needs->limits.push_back(limit);
  }
  return Status::Ok();
}

Status ReadAttribute(const YAML::Node& node, const std::string& field, const TemplateContext& ctx,
                     std::set<std::string>* seen, HostNeeds* needs) {
  yaml::MapReader a(node, field);
  const YAML::Node name_node = a.Child("name");
  const YAML::Node lists[2] = {a.Child("allOf"), a.Child("anyOf")};
  if (a.ok() && !name_node.IsDefined()) {
    a.Fail(Status::InvalidArgument(field + ".name: required field is missing"));
  }
  TSR_RETURN_IF_ERROR(a.Finish());
  if (!a.Has("allOf") && !a.Has("anyOf")) {
    return Status::InvalidArgument(field + ": needs anyOf or allOf");
  }
  TSR_ASSIGN_OR_RETURN(const std::string name, CapabilityName(name_node, "attr", field, ctx, seen));
  const bool os = name == "attr.worker.os.family";
  const bool arch = name == "attr.worker.cpu.arch";
  for (int k = 0; k < 2; ++k) {
    if (!lists[k].IsDefined() || lists[k].IsNull()) continue;
    const std::string lfield = field + (k == 0 ? ".allOf" : ".anyOf");
    TSR_RETURN_IF_ERROR(CheckList(lists[k], lfield, "value"));
    TSR_RETURN_IF_ERROR(yaml::CheckListSize(lists[k], lfield, kMaxAttributeValues));
    std::vector<std::string> values;
    bool all_known = true;
    for (size_t v = 0; v < lists[k].size(); ++v) {
      const std::string vfield = Item(lfield, v);
      TSR_ASSIGN_OR_RETURN(std::string raw, Scalar(lists[k][v], vfield));
      if (raw.empty()) return Status::InvalidArgument(vfield + ": must not be empty");
      TSR_ASSIGN_OR_RETURN(FormatString text, BindFormat(raw, ctx.TemplateScope(), vfield));
      if (!IsResolved(text)) {
        all_known = false;
        continue;
      }
      const std::string value = LiteralText(text);
      if (!IsAttributeValue(value)) {
        return Status::InvalidArgument(vfield + ": '" + value +
                                       "' is not an attribute value (latin letters, digits, "
                                       "'_' and '-', starting with a letter or '_', at most 100)");
      }
      const std::string lvalue = Lower(value);
      if (os && lvalue != "linux" && lvalue != "windows" && lvalue != "macos") {
        return Status::InvalidArgument(vfield + ": unknown OS family '" + value +
                                       "' (linux, windows, macos)");
      }
      if (arch && lvalue != "x86_64" && lvalue != "arm64") {
        return Status::InvalidArgument(vfield + ": unknown CPU architecture '" + value +
                                       "' (x86_64, arm64)");
      }
      values.push_back(lvalue);
    }
    if (name.empty() || !all_known) continue;  // checked again when the job is made
    if (os) {
      const bool any_linux = std::count(values.begin(), values.end(), "linux") > 0;
      const bool only_linux = std::all_of(values.begin(), values.end(),
                                          [](const std::string& v) { return v == "linux"; });
      if (k == 0 ? !only_linux : !any_linux) {
        return Status::InvalidArgument(lfield +
                                       ": attr.worker.os.family must allow linux (every Tessera "
                                       "worker runs Linux)");
      }
      continue;  // Always met: no tag.
    }
    if (k == 0) {
      for (const std::string& v : values) {
        if (std::find(needs->tags.begin(), needs->tags.end(), v) == needs->tags.end()) {
          needs->tags.push_back(v);
        }
      }
    } else {
      std::sort(values.begin(), values.end());
      values.erase(std::unique(values.begin(), values.end()), values.end());
      std::string any;
      for (const std::string& v : values) any += (any.empty() ? "" : "|") + v;
      if (std::find(needs->tags.begin(), needs->tags.end(), any) == needs->tags.end()) {
        needs->tags.push_back(any);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status ReadHostRequirements(const YAML::Node& node, const std::string& field,
                            const TemplateContext& ctx, HostNeeds* needs) {
  yaml::MapReader r(node, field);
  const YAML::Node amounts = r.Child("amounts");
  const YAML::Node attributes = r.Child("attributes");
  TSR_RETURN_IF_ERROR(r.Finish());
  if (!r.Has("amounts") && !r.Has("attributes")) {
    return Status::InvalidArgument(field + ": needs amounts or attributes");
  }
  if (r.Has("amounts")) TSR_RETURN_IF_ERROR(CheckList(amounts, field + ".amounts", "amount"));
  if (r.Has("attributes")) {
    TSR_RETURN_IF_ERROR(CheckList(attributes, field + ".attributes", "attribute"));
  }
  const size_t total =
      (r.Has("amounts") ? amounts.size() : 0) + (r.Has("attributes") ? attributes.size() : 0);
  if (total > kMaxHostRequirements) {
    return Status::InvalidArgument(field + ": at most " + std::to_string(kMaxHostRequirements) +
                                   " amounts and attributes together, got " +
                                   std::to_string(total));
  }
  std::set<std::string> seen;
  for (size_t i = 0; r.Has("amounts") && i < amounts.size(); ++i) {
    TSR_RETURN_IF_ERROR(ReadAmount(amounts[i], Item(field + ".amounts", i), ctx, &seen, needs));
  }
  seen.clear();
  for (size_t i = 0; r.Has("attributes") && i < attributes.size(); ++i) {
    TSR_RETURN_IF_ERROR(
        ReadAttribute(attributes[i], Item(field + ".attributes", i), ctx, &seen, needs));
  }
  if (needs->tags.size() > spec::kMaxLabels) {
    return Status::InvalidArgument(field + ".attributes: more than " +
                                   std::to_string(spec::kMaxLabels) + " Tessera tags");
  }
  if (needs->limits.size() > spec::kMaxLabels) {
    return Status::InvalidArgument(field + ".amounts: more than " +
                                   std::to_string(spec::kMaxLabels) + " units of named limits");
  }
  return Status::Ok();
}

}  // namespace tessera::openjd::internal
