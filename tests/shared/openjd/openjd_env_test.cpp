// Open Job Description around a job (shared/openjd/openjd.h): environment templates and how their
// parameter definitions merge with the job's (spec 1.2.1), path mapping rules and where they
// apply, a bundle's attached folders, host requirements in Tessera's terms, and templates checked
// without parameter values.

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <string>

#include "shared/base/yaml_util.h"
#include "shared/openjd/openjd.h"

namespace tessera::openjd {
namespace {

using V = std::vector<std::string>;

JobInputs Inputs(const std::map<std::string, std::string>& params = {},
                 const std::vector<std::string>& environments = {}) {
  JobInputs inputs;
  inputs.parameters = params;
  inputs.environments = environments;
  inputs.template_dir = "/bundles/shot";
  inputs.working_dir = "/home/ana";
  return inputs;
}

std::string Job(const std::string& params, const std::string& args) {
  return "specificationVersion: jobtemplate-2023-09\nname: j\n" + params +
         "steps:\n  - name: s\n    script: {actions: {onRun: {command: run, args: [" + args +
         "]}}}\n";
}

std::string Env(const std::string& name, const std::string& params, const std::string& body) {
  return "specificationVersion: environment-2023-09\n" + params + "environment:\n  name: " + name +
         "\n" + body;
}

StatusOr<TaskPlan> Plan(const StatusOr<Translation>& t,
                        const std::vector<PathMappingRule>& rules = {}) {
  if (!t.ok()) return t.status();
  return PlanTask(t->step_scenes.at("s"), 0, "/w", rules);
}

std::string ErrorOf(const StatusOr<Translation>& t) {
  return t.ok() ? "accepted" : t.status().message();
}

TEST(OpenJdEnvTest, EnvironmentTemplatesAreEnteredOutermostFirst) {
  const std::string conda = Env(
      "Conda", "parameterDefinitions: [{name: CondaPackages, type: STRING, default: blender}]\n",
      "  variables: {PACKAGES: \"{{Param.CondaPackages}}\"}\n"
      "  script:\n    actions:\n      onEnter: {command: conda, args: [\"{{Env.File.Setup}}\"]}\n"
      "    embeddedFiles: [{name: Setup, type: TEXT, data: \"x\"}]\n");
  const std::string licence = Env("Licence", "", "  variables: {LM_LICENSE: \"27000@lic\"}\n");
  const std::string job =
      "specificationVersion: jobtemplate-2023-09\nname: j\n"
      "jobEnvironments: [{name: Shot, variables: {SHOT: sh010}}]\n"
      "steps:\n  - name: s\n    stepEnvironments: [{name: Step, variables: "
      "{S: x}}]\n    script: {actions: {onRun: {command: run}}}\n";
  StatusOr<Translation> t =
      TranslateTemplate(job, Inputs({{"CondaPackages", "houdini"}}, {conda, licence}));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->environments, (V{"Conda", "Licence", "Shot"}));
  StatusOr<TaskPlan> plan = Plan(t);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->environments.size(), 4u);
  EXPECT_EQ(plan->environments[0].name, "Conda");
  EXPECT_EQ(plan->environments[0].variables,
            (std::vector<std::pair<std::string, std::string>>{{"PACKAGES", "houdini"}}));
  EXPECT_EQ(plan->environments[0].on_enter->args, (V{"/w/openjd/env-1/Setup"}));
  EXPECT_EQ(plan->environments[1].name, "Licence");
  EXPECT_EQ(plan->environments[2].name, "Shot");
  EXPECT_EQ(plan->environments[3].name, "Step");

  // An environment template names only its own parameters, even when the job defines more.
  const std::string stray = Env("Stray", "", "  variables: {X: \"{{Param.CondaPackages}}\"}\n");
  EXPECT_EQ(
      ErrorOf(TranslateTemplate(
          Job("parameterDefinitions: [{name: CondaPackages, type: STRING, default: a}]\n", ""),
          Inputs({}, {stray}))),
      "environments[0].environment.variables.X: {{Param.CondaPackages}}: no job parameter "
      "named 'CondaPackages'");
  EXPECT_EQ(ErrorOf(TranslateTemplate(Job("", ""), Inputs({}, {"specificationVersion: "
                                                               "environment-2099-01\n"}))),
            "environments[0].specificationVersion: 'environment-2099-01' is not supported "
            "(Tessera reads environment-2023-09)");
  EXPECT_EQ(CheckTemplate(stray).message(),
            "environment.variables.X: {{Param.CondaPackages}}: no job parameter named "
            "'CondaPackages'");
  EXPECT_TRUE(CheckTemplate(conda).ok());
}

TEST(OpenJdEnvTest, ParameterDefinitionsMergeTighterEachTime) {
  const std::string env = Env(
      "E",
      "parameterDefinitions: [{name: N, type: INT, minValue: 0, maxValue: 40, allowedValues: [10, "
      "20, 30], default: 20}, {name: Q, type: STRING, default: medium}]\n",
      "  variables: {N: \"{{Param.N}}\"}\n");
  auto made = [&](const std::string& job_params, const std::map<std::string, std::string>& p) {
    return TranslateTemplate(Job(job_params, "\"{{Param.N}}\""), Inputs(p, {env}));
  };
  // The job's default is the last one, and must meet both definitions' constraints.
  StatusOr<TaskPlan> plan =
      Plan(made("parameterDefinitions: [{name: N, type: INT, allowedValues: [10, 30], minValue: "
                "5, maxValue: 50, default: 10}]\n",
                {}));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->on_run.args, (V{"10"}));
  // No default in the job: the environment template's is the one.
  plan = Plan(made("parameterDefinitions: [{name: N, type: INT}]\n", {}));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->on_run.args, (V{"20"}));
  // A value outside what both allow is refused; a default the merge excludes too.
  EXPECT_EQ(
      ErrorOf(made("parameterDefinitions: [{name: N, type: INT, maxValue: 100}]\n", {{"N", "45"}})),
      "parameter N: 45 is above maxValue 40");
  EXPECT_EQ(ErrorOf(made("parameterDefinitions: [{name: N, type: INT, default: 15}]\n", {})),
            "parameter N (default, merged): '15' is not one of allowedValues (10, 20, 30)");
  // Two types, or two PATH kinds, for one name cannot be merged.
  EXPECT_EQ(ErrorOf(made("parameterDefinitions: [{name: N, type: STRING}]\n", {})),
            "environments[0].parameterDefinitions[0] and parameterDefinitions[0]: parameter N is "
            "defined with two types (INT, STRING)");
  const std::string path_env =
      Env("P", "parameterDefinitions: [{name: D, type: PATH, dataFlow: IN}]\n",
          "  variables: {D: \"{{Param.D}}\"}\n");
  EXPECT_EQ(ErrorOf(TranslateTemplate(
                Job("parameterDefinitions: [{name: D, type: PATH, dataFlow: OUT}]\n", ""),
                Inputs({{"D", "/x"}}, {path_env}))),
            "environments[0].parameterDefinitions[0] and parameterDefinitions[0]: parameter D has "
            "two dataFlow (IN, OUT)");
  // A parameter only an environment template defines is a job parameter all the same (given a
  // value), but the job template's own strings name only its own parameters.
  EXPECT_EQ(ErrorOf(TranslateTemplate(Job("", ""), Inputs({{"Q", "high"}, {"N", "30"}}, {env}))),
            "accepted");
  EXPECT_EQ(ErrorOf(TranslateTemplate(Job("", ""), Inputs({{"R", "x"}}, {env}))),
            "parameter R: the template defines no such parameter (N, Q)");
  EXPECT_EQ(ErrorOf(made("", {})),
            "steps[0].script.actions.onRun.args[0]: {{Param.N}}: no job parameter named 'N'");
}

TEST(OpenJdEnvTest, PathMappingRulesApplyToPathValues) {
  StatusOr<std::vector<PathMappingRule>> rules = ParsePathMappingRules(
      R"({"version": "pathmapping-1.0", "path_mapping_rules": [
            {"source_path_format": "POSIX", "source_path": "/original", "destination_path": "/mapped"},
            {"source_path_format": "WINDOWS", "source_path": "P:\\projects", "destination_path": "/mnt/p"},
            {"source_path_format": "WINDOWS", "source_path": "\\\\server\\share", "destination_path": "/srv"}]})",
      "rules");
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  SortRules(&*rules);
  EXPECT_EQ(MapPath(*rules, "/original/path/a.exr"), "/mapped/path/a.exr");
  EXPECT_EQ(MapPath(*rules, "/original"), "/mapped");
  EXPECT_EQ(MapPath(*rules, "/originality/x"), "/originality/x");  // whole parts only
  EXPECT_EQ(MapPath(*rules, "p:/Projects\\sh010\\a.blend"), "/mnt/p/sh010/a.blend");
  EXPECT_EQ(MapPath(*rules, "//SERVER/share/x"), "/srv/x");
  EXPECT_EQ(MapPath(*rules, "/elsewhere"), "/elsewhere");

  // Param.X of a PATH parameter is mapped where the worker evaluates it; RawParam.X never is;
  // a PATH task parameter the same. The worker's own rules come after the job's.
  const std::string text =
      "specificationVersion: jobtemplate-2023-09\nname: j\n"
      "parameterDefinitions: [{name: In, type: PATH}]\nsteps:\n  - name: s\n"
      "    parameterSpace: {taskParameterDefinitions: [{name: F, type: PATH, range: "
      "[/original/f]}]}\n"
      "    script: {actions: {onRun: {command: run, args: [\"{{Param.In}}\", \"{{RawParam.In}}\", "
      "\"{{Task.Param.F}}\", \"{{Task.RawParam.F}}\", \"{{Session.HasPathMappingRules}}\"]}}}\n";
  JobInputs inputs = Inputs({{"In", "/original/path"}});
  inputs.path_mapping = {{"POSIX", "/original", "/mapped", false}};
  StatusOr<TaskPlan> plan = Plan(TranslateTemplate(text, inputs));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->on_run.args,
            (V{"/mapped/path", "/original/path", "/mapped/f", "/original/f", "true"}));
  inputs.path_mapping.clear();
  plan = Plan(TranslateTemplate(text, inputs), {{"POSIX", "/original/path", "/local", false}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->on_run.args,
            (V{"/local", "/original/path", "/original/f", "/original/f", "true"}));

  EXPECT_EQ(ParsePathMappingRules("[{source_path: relative, destination_path: /x}]", "r")
                .status()
                .message(),
            "r[0].source_path: 'relative' is not absolute");
  EXPECT_EQ(
      ParsePathMappingRules("[{source_path: /a, destination_path: /x, in_session: true}]", "r")
          .status()
          .message(),
      "r[0].in_session: unknown field (source_path_format, source_path, "
      "destination_path)");
  EXPECT_EQ(ParsePathMappingRules("{version: pathmapping-2.0, path_mapping_rules: []}", "r")
                .status()
                .message(),
            "r.version: expected \"pathmapping-1.0\"");
}

TEST(OpenJdEnvTest, ABundlesFoldersAreMappedIntoTheSession) {
  const std::string text =
      Job("parameterDefinitions: [{name: Scripts, type: PATH, default: scripts, dataFlow: IN}, "
          "{name: Out, type: PATH, default: output, dataFlow: OUT}, {name: Tex, type: PATH, "
          "dataFlow: IN}]\n",
          "\"{{Param.Scripts}}/run.sh\", \"{{Param.Out}}\", \"{{Param.Tex}}\"");
  JobInputs inputs = Inputs({{"Tex", "/textures/wood.png"}});
  inputs.input_roots = {"/bundles/shot", "/textures"};
  inputs.output_dirs = {"/bundles/shot/output", "/renders/sh010"};
  StatusOr<Translation> t = TranslateTemplate(text, inputs);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(YAML::Load(t->job_yaml)["steps"][0]["settings"]["outputs"].as<std::string>(), "files");
  StatusOr<TaskPlan> plan = Plan(t);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->on_run.args, (V{"/w/openjd/data/0/scripts/run.sh", "/w/openjd/data/0/output",
                                  "/w/openjd/data/1/wood.png"}));
  ASSERT_EQ(plan->outputs.size(), 2u);
  EXPECT_EQ(plan->outputs[0].dir, "openjd/data/0/output");
  EXPECT_EQ(plan->outputs[0].name, "output");
  EXPECT_EQ(plan->outputs[1].dir, "openjd/data/2");  // a folder of its own
  EXPECT_EQ(plan->outputs[1].name, "sh010");
  // The session's own folders are checked when the session is read: never outside it.
  nlohmann::json session = nlohmann::json::parse(t->step_scenes.at("s"));
  session["outputs"][0]["dir"] = "openjd/data/../../etc";
  EXPECT_EQ(PlanTask(session.dump(), 0, "/w").status().message(),
            "openjd session: outputs: not a folder of the session");
  session = nlohmann::json::parse(t->step_scenes.at("s"));
  session["path_mapping"][0]["destination_path"] = "../escape";
  EXPECT_EQ(PlanTask(session.dump(), 0, "/w").status().message(),
            "openjd session: path_mapping[0].destination_path: not a folder of the session");
}

TEST(OpenJdEnvTest, HostRequirementsBecomeResourcesTagsAndLimits) {
  auto needs = [](const std::string& requirements,
                  const std::map<std::string, std::string>& p = {}) -> YAML::Node {
    StatusOr<Translation> t = TranslateTemplate(
        "specificationVersion: jobtemplate-2023-09\nname: j\nparameterDefinitions: [{name: K, "
        "type: STRING, default: gpu_type}]\nsteps:\n  - name: s\n    hostRequirements: " +
            requirements + "\n    script: {actions: {onRun: {command: run}}}\n",
        Inputs(p));
    if (!t.ok()) return YAML::Node(t.status().message());
    return YAML::Load(t->job_yaml)["steps"][0];
  };
  // anyOf of several values: a worker needs one of them; allOf: each; values lower-cased.
  YAML::Node step = needs(
      "{attributes: [{name: \"attr.custom.{{Param.K}}\", anyOf: [H100, a100]}, {name: "
      "attr.custom.site, allOf: [paris]}, {name: attr.worker.os.family, anyOf: [linux, macos]}]}");
  ASSERT_TRUE(step.IsMap()) << step.as<std::string>();
  EXPECT_EQ(step["tags"].as<V>(), (V{"a100|h100", "paris"}));
  // A custom amount is the farm's named limit, held ceil(min) times.
  step = needs(
      "{amounts: [{name: amount.custom.licenses, min: 1.5}, {name: amount.worker.vcpu, "
      "min: 2}]}");
  ASSERT_TRUE(step.IsMap()) << step.as<std::string>();
  EXPECT_EQ(step["limits"].as<V>(), (V{"licenses", "licenses"}));
  EXPECT_EQ(step["resources"]["cpu_cores"].as<int>(), 2);
  // Names resolved from parameters are checked once resolved.
  EXPECT_EQ(needs("{amounts: [{name: \"{{Param.K}}\", min: 1}]}", {{"K", "amount.worker.x"}})
                .as<std::string>(),
            "steps[0].hostRequirements.amounts[0].name: 'amount.worker.x' is in the scope "
            "amount.worker, which the specification reserves (amount.worker.vcpu, memory, gpu, "
            "gpu.memory, disk.scratch are defined)");
  EXPECT_EQ(needs("{attributes: [{name: \"attr.custom.{{Param.K}}\", anyOf: [a]}, {name: "
                  "attr.custom.gpu_type, anyOf: [b]}]}")
                .as<std::string>(),
            "steps[0].hostRequirements.attributes[1].name: attr.custom.gpu_type is given twice");
  EXPECT_EQ(needs("{attributes: [{name: attr.custom.x, anyOf: [\"{{Param.K}}\"]}]}",
                  {{"K", "not valid!"}})
                .as<std::string>(),
            "steps[0].hostRequirements.attributes[0].anyOf[0]: 'not valid!' is not an attribute "
            "value (latin letters, digits, '_' and '-', starting with a letter or '_', at most "
            "100)");
  const std::string hundred = "amount.custom." + std::string(86, 'a');
  EXPECT_TRUE(needs("{amounts: [{name: " + hundred + ", min: 1}]}").IsMap());
  EXPECT_EQ(needs("{amounts: [{name: " + hundred + "a, min: 1}]}").as<std::string>(),
            "steps[0].hostRequirements.amounts[0].name: '" + hundred +
                "a' is not an amount name ([vendor:]amount.<identifier>[.<identifier>]..., at "
                "most 100 characters)");
}

TEST(OpenJdEnvTest, TemplatesAreCheckedWithoutValues) {
  // What depends on a value waits for the job: a range from a parameter, an association of it
  // with a list, a name made of a parameter.
  const std::string text =
      "specificationVersion: jobtemplate-2023-09\nname: \"Render {{Param.Shot}}\"\n"
      "parameterDefinitions: [{name: Frames, type: STRING}, {name: Shot, type: STRING}]\n"
      "steps:\n  - name: s\n    parameterSpace:\n      taskParameterDefinitions:\n"
      "        - {name: F, type: INT, range: \"{{Param.Frames}}\"}\n"
      "        - {name: C, type: STRING, range: [a, b]}\n      combination: \"(F, C)\"\n"
      "    hostRequirements: {attributes: [{name: \"attr.custom.{{Param.Shot}}\", anyOf: [x]}]}\n"
      "    script: {actions: {onRun: {command: run, args: [\"{{Task.Param.F}}\"]}}}\n";
  EXPECT_TRUE(CheckTemplate(text).ok()) << CheckTemplate(text).message();
  // Made into a job, the values decide: three frames cannot pair with two cameras.
  EXPECT_EQ(ErrorOf(TranslateTemplate(text, Inputs({{"Frames", "1-3"}, {"Shot", "sh010"}}))),
            "steps[0].parameterSpace.combination: the members of (F, C) must have as many values "
            "each (F has 3, C has 2)");
  EXPECT_EQ(ErrorOf(TranslateTemplate(text, Inputs({{"Frames", "1-2"}, {"Shot", "sh010"}}))),
            "accepted");
  // What the template itself writes is checked in full.
  EXPECT_EQ(CheckTemplate("specificationVersion: jobtemplate-2023-09\nname: j\nsteps:\n"
                          "  - name: s\n    parameterSpace: {taskParameterDefinitions: [{name: F, "
                          "type: INT, range: \"1-2000\"}]}\n"
                          "    script: {actions: {onRun: {command: run}}}\n")
                .message(),
            "steps[0].parameterSpace.taskParameterDefinitions[0].range: more than 1024 values (the "
            "specification's most for one task parameter; combine parameters for more tasks)");
  EXPECT_EQ(KindOf(text), DocumentKind::kJobTemplate);
  EXPECT_EQ(KindOf("specificationVersion: environment-2023-09\n"),
            DocumentKind::kEnvironmentTemplate);
  EXPECT_EQ(KindOf("name: x\n"), DocumentKind::kNone);
}

TEST(OpenJdEnvTest, AMissingOptionalKeyIsAnUndefinedNodeNotAThrowingOne) {
  // The root cause of refused userInterface blocks: yaml-cpp answers a lookup of a missing key
  // with an "invalid" node whose every type query throws.
  YAML::Node root = YAML::Load("{a: 1}");
  yaml::MapReader r(root, "x");
  const YAML::Node missing = r.Child("b");
  EXPECT_FALSE(missing.IsDefined());
  EXPECT_NO_THROW({
    EXPECT_FALSE(missing.IsNull());
    EXPECT_FALSE(missing.IsSequence());
    EXPECT_FALSE(missing.IsMap());
    EXPECT_FALSE(missing.IsScalar());
  });
}

}  // namespace
}  // namespace tessera::openjd
