// Host requirements of OpenJD steps (spec 3.3) as Tessera resources and tags
// (shared/openjd.h).

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <set>

#include "shared/openjd_internal.h"
#include "shared/yaml_util.h"

namespace tessera::openjd::internal {

namespace {

constexpr size_t kMaxHostRequirements = 50;
constexpr size_t kMaxAttributeValues = 50;

Status CheckList(const YAML::Node& node, const std::string& field, const char* what) {
  if (!node.IsSequence() || node.size() == 0) {
    return Status::InvalidArgument(field + ": expected a list of at least one " + what);
  }
  return Status::Ok();
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// [<Identifier>:]<kind>.<Identifier>[.<Identifier>]* (spec 3.3.1.1, 3.3.2.1).
bool IsCapabilityName(const std::string& name, const std::string& kind) {
  if (name.empty() || name.size() > 100) return false;
  std::string rest = name;
  size_t colon = rest.find(':');
  if (colon != std::string::npos) {
    if (!IsIdentifier(rest.substr(0, colon))) return false;
    rest = rest.substr(colon + 1);
  }
  if (rest.rfind(kind + ".", 0) != 0) return false;
  rest = rest.substr(kind.size() + 1);
  size_t start = 0;
  while (true) {
    size_t dot = rest.find('.', start);
    if (!IsIdentifier(rest.substr(start, dot == std::string::npos ? dot : dot - start))) {
      return false;
    }
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// An amount's or attribute's name (`kind` "amount" or "attr"), lower-cased: checked, and not
// given twice in one list (`seen`). Errors name `field` and call it `what`.
StatusOr<std::string> CapabilityName(const std::string& name, const std::string& kind,
                                     const char* what, const std::string& field,
                                     std::set<std::string>* seen) {
  std::string lname = Lower(name);
  if (!IsCapabilityName(lname, kind)) {
    return Status::InvalidArgument(field + ".name: '" + name + "' is not " + what + " name");
  }
  if (!seen->insert(lname).second) {
    return Status::InvalidArgument(field + ".name: " + name + " is given twice");
  }
  return lname;
}

}  // namespace

Status ReadHostRequirements(const YAML::Node& node, const std::string& field,
                            const TemplateContext& ctx, spec::ResourceSpec* resources,
                            std::vector<std::string>* tags) {
  yaml::MapReader r(node, field);
  YAML::Node amounts = r.Child("amounts");
  YAML::Node attributes = r.Child("attributes");
  TSR_RETURN_IF_ERROR(r.Finish());
  if (!r.Has("amounts") && !r.Has("attributes")) {
    return Status::InvalidArgument(field + ": needs amounts or attributes");
  }
  size_t total = 0;
  std::set<std::string> seen;
  if (r.Has("amounts")) {
    TSR_RETURN_IF_ERROR(CheckList(amounts, field + ".amounts", "amount"));
    total += amounts.size();
    for (size_t i = 0; i < amounts.size() && total <= kMaxHostRequirements; ++i) {
      const std::string afield = Item(field + ".amounts", i);
      yaml::MapReader a(amounts[i], afield);
      std::string name;
      double min = 0, max = 0;
      a.Required("name", &name).Optional("min", &min).Optional("max", &max);
      TSR_RETURN_IF_ERROR(a.Finish());
      TSR_ASSIGN_OR_RETURN(const std::string lname,
                           CapabilityName(name, "amount", "an amount", afield, &seen));
      if (!a.Has("min") && !a.Has("max")) {
        return Status::InvalidArgument(afield + ": needs min or max");
      }
      if (min < 0 || (a.Has("max") && (max <= 0 || max < min))) {
        return Status::InvalidArgument(afield + ": min must be >= 0 and max > 0 and >= min");
      }
      const double reserve = std::ceil(min);
      // Tessera reserves whole units, exactly ceil(min) of them, for each task: a max at or
      // above that holds; one below it cannot be met.
      if (a.Has("max") && max < reserve) {
        return Status::InvalidArgument(afield + ": " + name + " max " + std::to_string(max) +
                                       " cannot be expressed: Tessera reserves whole units, " +
                                       std::to_string(reserve) +
                                       " (min rounded up), for each task");
      }
      if (reserve > static_cast<double>(INT_MAX)) {
        return Status::InvalidArgument(afield + ".min: more than any worker has");
      }
      if (lname == "amount.worker.vcpu") {
        resources->cpu_cores = static_cast<int>(reserve);
      } else if (lname == "amount.worker.memory") {
        resources->ram_mb = static_cast<int64_t>(reserve);
      } else if (lname == "amount.worker.gpu") {
        resources->gpus = static_cast<int>(reserve);
      } else if (lname == "amount.worker.gpu.memory") {
        resources->gpu_memory_mb = static_cast<int64_t>(reserve);
      } else {
        return Status::InvalidArgument(
            afield + ".name: amount " + name +
            " is not supported (Tessera reserves amount.worker.vcpu, amount.worker.memory, "
            "amount.worker.gpu and amount.worker.gpu.memory)");
      }
    }
  }
  if (r.Has("attributes")) {
    TSR_RETURN_IF_ERROR(CheckList(attributes, field + ".attributes", "attribute"));
    total += attributes.size();
  }
  if (total > kMaxHostRequirements) {
    return Status::InvalidArgument(field + ": at most " + std::to_string(kMaxHostRequirements) +
                                   " amounts and attributes together, got " +
                                   std::to_string(total));
  }
  if (!r.Has("attributes")) return Status::Ok();
  seen.clear();
  for (size_t i = 0; i < attributes.size(); ++i) {
    const std::string afield = Item(field + ".attributes", i);
    yaml::MapReader a(attributes[i], afield);
    std::string name;
    a.Required("name", &name);
    YAML::Node lists[2] = {a.Child("allOf"), a.Child("anyOf")};
    TSR_RETURN_IF_ERROR(a.Finish());
    TSR_ASSIGN_OR_RETURN(const std::string lname,
                         CapabilityName(name, "attr", "an attribute", afield, &seen));
    if (!a.Has("allOf") && !a.Has("anyOf")) {
      return Status::InvalidArgument(afield + ": needs anyOf or allOf");
    }
    const bool os = lname == "attr.worker.os.family";
    const bool arch = lname == "attr.worker.cpu.arch";
    if (!os && !arch && lname.rfind("attr.custom.", 0) != 0) {
      return Status::InvalidArgument(
          afield + ".name: attribute " + name +
          " is not supported (attr.worker.os.family, attr.worker.cpu.arch, attr.custom.*)");
    }
    for (int k = 0; k < 2; ++k) {
      if (!lists[k].IsDefined() || lists[k].IsNull()) continue;
      const std::string lfield = afield + (k == 0 ? ".allOf" : ".anyOf");
      TSR_RETURN_IF_ERROR(CheckList(lists[k], lfield, "value"));
      TSR_RETURN_IF_ERROR(yaml::CheckListSize(lists[k], lfield, kMaxAttributeValues));
      std::vector<std::string> values;
      for (size_t v = 0; v < lists[k].size(); ++v) {
        const std::string vfield = Item(lfield, v);
        if (!lists[k][v].IsScalar()) return Status::InvalidArgument(vfield + ": expected a value");
        TSR_ASSIGN_OR_RETURN(FormatString text,
                             BindFormat(lists[k][v].Scalar(), ctx.TemplateScope(), vfield));
        const std::string value = LiteralText(text);
        const bool valid =
            !value.empty() && value.size() <= 100 && !(value[0] >= '0' && value[0] <= '9') &&
            value[0] != '-' && std::all_of(value.begin(), value.end(), [](char c) {
              return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
            });
        if (!valid) {
          return Status::InvalidArgument(vfield + ": '" + value +
                                         "' is not an attribute value (latin letters, digits, "
                                         "'_' and '-', starting with a letter or '_')");
        }
        if (os && Lower(value) != "linux" && Lower(value) != "windows" && Lower(value) != "macos") {
          return Status::InvalidArgument(vfield + ": unknown OS family '" + value +
                                         "' (linux, windows, macos)");
        }
        if (arch && Lower(value) != "x86_64" && Lower(value) != "arm64") {
          return Status::InvalidArgument(vfield + ": unknown CPU architecture '" + value +
                                         "' (x86_64, arm64)");
        }
        values.push_back(value);
      }
      if (os) {
        const bool linux_only = std::all_of(
            values.begin(), values.end(), [](const std::string& v) { return Lower(v) == "linux"; });
        const bool any_linux = std::any_of(
            values.begin(), values.end(), [](const std::string& v) { return Lower(v) == "linux"; });
        if (k == 0 ? !linux_only : !any_linux) {
          return Status::InvalidArgument(lfield +
                                         ": attr.worker.os.family must allow linux "
                                         "(every Tessera worker runs Linux)");
        }
        continue;  // Always met: no tag.
      }
      if (k == 1 && values.size() > 1) {
        return Status::InvalidArgument(lfield +
                                       ": Tessera tags are all required: anyOf with "
                                       "several values is not supported");
      }
      for (const std::string& v : values) {
        if (std::find(tags->begin(), tags->end(), v) == tags->end()) tags->push_back(v);
      }
    }
  }
  if (tags->size() > spec::kMaxLabels) {
    return Status::InvalidArgument(field + ".attributes: more than " +
                                   std::to_string(spec::kMaxLabels) + " Tessera tags");
  }
  return Status::Ok();
}

}  // namespace tessera::openjd::internal
