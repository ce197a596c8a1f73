// Open Job Description templates (shared/openjd/openjd.h): a template and its parameter values
// become a Tessera job file with steps, and each task of a step becomes the files and commands a
// worker runs. Cases follow the 2023-09 template schema (wiki/2023-09-Template-Schemas).

#include "shared/openjd/openjd.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <string>

#include "shared/jobs/job_steps.h"

namespace tessera::openjd {
namespace {

constexpr const char* kTemplate = R"yaml(
specificationVersion: jobtemplate-2023-09
name: "{{Param.Shot}} render"
description: A shot, rendered from two cameras then encoded.
parameterDefinitions:
  - name: Shot
    type: STRING
    default: sh010
    minLength: 2
    userInterface: {control: LINE_EDIT, label: Shot}
  - name: Frames
    type: STRING
    default: "1-10"
  - name: Scene
    type: PATH
    objectType: FILE
    dataFlow: IN
    default: sh010.blend
  - name: Samples
    type: INT
    default: 64
    minValue: 1
    maxValue: 4096
  - name: Exposure
    type: FLOAT
    default: 0.5
    allowedValues: [0.5, 1.5]
jobEnvironments:
  - name: Shot setup
    description: Where the shot lives.
    variables:
      SHOT: "{{Param.Shot}}"
      SETUP_LOG: "{{Session.WorkingDirectory}}/setup.log"
    script:
      actions:
        onEnter: {command: bash, args: ["{{Env.File.Enter}}", "{{RawParam.Scene}}"]}
        onExit:
          command: bash
          args: ["-c", "echo bye"]
          cancelation: {mode: NOTIFY_THEN_TERMINATE}
      embeddedFiles:
        - name: Enter
          type: TEXT
          runnable: true
          data: "echo entering {{Param.Shot}} in {{Session.WorkingDirectory}}"
steps:
  - name: Render Beauty
    parameterSpace:
      taskParameterDefinitions:
        - {name: Frame, type: INT, range: "{{Param.Frames}}"}
        - {name: Camera, type: STRING, range: [left, right, top]}
        - {name: Lens, type: FLOAT, range: ["35", "50", "85.5"]}
      combination: "Frame * (Camera, Lens)"
    hostRequirements:
      amounts:
        - {name: amount.worker.vcpu, min: 3.5}
        - {name: amount.worker.memory, min: 8000, max: 16000}
        - {name: Amount.Worker.GPU, min: 1}
        - {name: amount.worker.gpu.memory, min: 16000}
      attributes:
        - {name: attr.worker.os.family, anyOf: [linux, windows]}
        - {name: attr.worker.cpu.arch, allOf: [x86_64]}
        - {name: attr.custom.license, anyOf: ["{{Param.Shot}}_lic"]}
    stepEnvironments:
      - name: Render env
        variables: {RENDER_SAMPLES: "{{Param.Samples}}"}
    script:
      actions:
        onRun:
          command: "{{Task.File.Run}}"
          args: ["{{Param.Scene}}", "{{Task.Param.Frame}}", "{{Task.Param.Camera}}",
                 "{{ Task.RawParam.Lens }}", "{{Param.Exposure}}"]
          timeout: 3600
          cancelation: {mode: NOTIFY_THEN_TERMINATE, notifyPeriodInSeconds: 90}
      embeddedFiles:
        - name: Run
          type: TEXT
          filename: run.sh
          runnable: true
          data: |
            #!/bin/bash
            render --camera {{Task.Param.Camera}} --frame {{Task.Param.Frame}} --out {{Session.WorkingDirectory}}
        - name: Notes
          type: TEXT
          data: "run script: {{Task.File.Run}}"
  - name: Encode
    dependencies: [{dependsOn: Render Beauty}]
    script:
      actions:
        onRun: {command: ffmpeg, args: ["-i", "{{Param.Shot}}.%04d.exr"]}
)yaml";

// A submission of a template in /mnt/shots by someone in /home/ana.
JobInputs Inputs(const std::map<std::string, std::string>& params = {}) {
  JobInputs inputs;
  inputs.parameters = params;
  inputs.template_dir = "/mnt/shots";
  inputs.working_dir = "/home/ana";
  return inputs;
}

std::string ErrorOf(const std::string& text,
                    const std::map<std::string, std::string>& params = {}) {
  StatusOr<Translation> t = TranslateTemplate(text, Inputs(params));
  return t.ok() ? "accepted" : t.status().message();
}

// A one-step template around `step_body` (the step's keys after its name, indented 4).
std::string OneStep(const std::string& step_body, const std::string& top = "") {
  return "specificationVersion: jobtemplate-2023-09\nname: j\n" + top + "steps:\n  - name: s\n" +
         step_body;
}
const std::string kRun = "    script: {actions: {onRun: {command: run}}}\n";

TEST(OpenJdTest, RecognisesJobTemplatesOnly) {
  EXPECT_TRUE(IsJobTemplate(kTemplate));
  EXPECT_TRUE(IsJobTemplate(R"({"specificationVersion": "jobtemplate-2023-09", "name": "x"})"));
  EXPECT_TRUE(IsJobTemplate("specificationVersion: jobtemplate-2099-01\n"));  // refused later
  EXPECT_FALSE(IsJobTemplate("specificationVersion: environment-2023-09\n"));
  EXPECT_FALSE(IsJobTemplate("name: shot\nframes: 1-10\n"));
  EXPECT_FALSE(IsJobTemplate("steps: [\n"));
  EXPECT_FALSE(IsJobTemplate(std::string("\xff\xfe", 2)));
  EXPECT_FALSE(IsJobTemplate(""));
}

TEST(OpenJdTest, TranslatesStepsResourcesTagsAndDependencies) {
  StatusOr<Translation> t = TranslateTemplate(kTemplate, Inputs({{"Frames", "1-20:2"}}));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // Frames 1,3..19 (10) x the three (Camera, Lens) pairs, plus Encode's single task.
  EXPECT_EQ(t->task_count, 31);
  ASSERT_EQ(t->step_names.size(), 2u);
  EXPECT_EQ(t->step_names[0],
            std::make_pair(std::string("Render Beauty"), std::string("Render-Beauty")));
  EXPECT_EQ(t->step_names[1], std::make_pair(std::string("Encode"), std::string("Encode")));
  ASSERT_EQ(t->step_scenes.size(), 2u);
  EXPECT_TRUE(t->step_scenes.count("Render-Beauty"));

  YAML::Node job = YAML::Load(t->job_yaml);
  EXPECT_EQ(job["name"].as<std::string>(), "sh010-render");
  ASSERT_EQ(job["steps"].size(), 2u);
  YAML::Node render = job["steps"][0];
  EXPECT_EQ(render["name"].as<std::string>(), "Render-Beauty");
  EXPECT_EQ(render["renderer"].as<std::string>(), "openjd");
  EXPECT_EQ(render["scene"].as<std::string>(), "Render-Beauty.openjd.json");
  EXPECT_EQ(render["frames"].as<std::string>(), "1-30");
  EXPECT_EQ(render["chunk_size"].as<int>(), 1);
  EXPECT_EQ(render["resources"]["cpu_cores"].as<int>(), 4);  // ceil(3.5)
  EXPECT_EQ(render["resources"]["ram_mb"].as<int>(), 8000);
  EXPECT_EQ(render["resources"]["gpus"].as<int>(), 1);
  EXPECT_EQ(render["resources"]["gpu_memory_mb"].as<int>(), 16000);
  // os.family allows linux: no tag; cpu.arch and the custom attribute are required tags.
  EXPECT_EQ(render["tags"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"x86_64", "sh010_lic"}));
  EXPECT_FALSE(render["depends_on"].IsDefined());
  YAML::Node encode = job["steps"][1];
  EXPECT_EQ(encode["frames"].as<std::string>(), "1-1");
  EXPECT_EQ(encode["depends_on"][0]["step"].as<std::string>(), "Render-Beauty");
  EXPECT_FALSE(encode["resources"].IsDefined());
  EXPECT_FALSE(encode["tags"].IsDefined());

  // The session keeps the range as one run, the parameters substituted, and says its version.
  nlohmann::json session = nlohmann::json::parse(t->step_scenes.at("Render-Beauty"));
  EXPECT_EQ(session["version"], 2);
  EXPECT_EQ(session["job"], "sh010 render");
  EXPECT_EQ(session["parameter_space"]["parameters"][0]["ranges"],
            nlohmann::json::parse("[[1, 2, 10]]"));
  EXPECT_EQ(session["environments"].size(), 2u);
  EXPECT_EQ(session["environments"][0]["scope"], "job");
  EXPECT_EQ(session["environments"][1]["scope"], "step");
}

TEST(OpenJdTest, PlansTasksAcrossAProductAndAnAssociation) {
  StatusOr<Translation> t = TranslateTemplate(kTemplate, Inputs({{"Frames", "1-4"}}));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const std::string& scene = t->step_scenes.at("Render-Beauty");
  // Frame * (Camera, Lens): 4 frames x 3 pairs; the pair varies fastest and moves together.
  struct Case {
    int64_t index;
    std::string frame, camera, lens;
  };
  for (const Case& c :
       {Case{0, "1", "left", "35"}, Case{1, "1", "right", "50"}, Case{5, "2", "top", "85.5"},
        Case{7, "3", "right", "50"}, Case{11, "4", "top", "85.5"}}) {
    StatusOr<TaskPlan> plan = PlanTask(scene, c.index, "/w/task");
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->on_run.args, (std::vector<std::string>{"/mnt/shots/sh010.blend", c.frame,
                                                           c.camera, c.lens, "0.5"}))
        << "task " << c.index;
    EXPECT_EQ(plan->task_parameters,
              (std::vector<std::pair<std::string, std::string>>{
                  {"Frame", c.frame}, {"Camera", c.camera}, {"Lens", c.lens}}));
  }
  EXPECT_FALSE(PlanTask(scene, 12, "/w/task").ok());
  EXPECT_FALSE(PlanTask(scene, -1, "/w/task").ok());
  EXPECT_FALSE(PlanTask(scene, 0, "relative/dir").ok());
}

TEST(OpenJdTest, ResolvesFormatStringsInEachScope) {
  StatusOr<Translation> t =
      TranslateTemplate(kTemplate, Inputs({{"Shot", "sh020"}, {"Frames", "7"}}));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(YAML::Load(t->job_yaml)["name"].as<std::string>(), "sh020-render");
  StatusOr<TaskPlan> plan = PlanTask(t->step_scenes.at("Render-Beauty"), 2, "/w/t3/");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();

  // Job environment, then the step's: entering order.
  ASSERT_EQ(plan->environments.size(), 2u);
  const EnvironmentPlan& job_env = plan->environments[0];
  EXPECT_EQ(job_env.name, "Shot setup");
  EXPECT_EQ(job_env.variables, (std::vector<std::pair<std::string, std::string>>{
                                   {"SHOT", "sh020"}, {"SETUP_LOG", "/w/t3/setup.log"}}));
  ASSERT_EQ(job_env.files.size(), 1u);
  EXPECT_EQ(job_env.files[0].path, "/w/t3/openjd/env-1/Enter");  // no filename: its name
  EXPECT_TRUE(job_env.files[0].runnable);
  EXPECT_EQ(job_env.files[0].data, "echo entering sh020 in /w/t3");
  ASSERT_TRUE(job_env.on_enter.has_value());
  EXPECT_EQ(job_env.on_enter->command, "bash");
  EXPECT_EQ(job_env.on_enter->args,
            (std::vector<std::string>{"/w/t3/openjd/env-1/Enter", "/mnt/shots/sh010.blend"}));
  const EnvironmentPlan& step_env = plan->environments[1];
  EXPECT_EQ(step_env.name, "Render env");
  EXPECT_FALSE(step_env.on_enter.has_value());
  EXPECT_FALSE(step_env.on_exit.has_value());
  EXPECT_EQ(step_env.variables,
            (std::vector<std::pair<std::string, std::string>>{{"RENDER_SAMPLES", "64"}}));

  // The step script: Task.File, Task.Param and Session resolved.
  EXPECT_EQ(plan->on_run.command, "/w/t3/openjd/task/run.sh");
  EXPECT_EQ(plan->on_run.args[1], "7");
  EXPECT_EQ(plan->on_run.args[2], "top");
  ASSERT_EQ(plan->files.size(), 2u);
  EXPECT_EQ(plan->files[0].path, "/w/t3/openjd/task/run.sh");
  EXPECT_TRUE(plan->files[0].runnable);
  EXPECT_EQ(plan->files[0].data, "#!/bin/bash\nrender --camera top --frame 7 --out /w/t3\n");
  EXPECT_EQ(plan->files[1].path, "/w/t3/openjd/task/Notes");
  EXPECT_FALSE(plan->files[1].runnable);
  EXPECT_EQ(plan->files[1].data, "run script: /w/t3/openjd/task/run.sh");
}

TEST(OpenJdTest, SessionValuesAndPathMappingFile) {
  StatusOr<Translation> t = TranslateTemplate(
      OneStep("    script:\n      actions:\n        onRun:\n          command: run\n"
              "          args: [\"{{Session.HasPathMappingRules}}\", "
              "\"{{Session.PathMappingRulesFile}}\"]\n"),
      Inputs());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  StatusOr<TaskPlan> plan = PlanTask(t->step_scenes.at("s"), 0, "/w");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->on_run.args, (std::vector<std::string>{"false", "/w/openjd/path-mapping.json"}));
  // The file it names exists, holding no rules.
  ASSERT_EQ(plan->files.size(), 1u);
  EXPECT_EQ(plan->files[0].path, "/w/openjd/path-mapping.json");
  EXPECT_EQ(nlohmann::json::parse(plan->files[0].data),
            nlohmann::json::parse(R"({"version": "pathmapping-1.0", "path_mapping_rules": []})"));
  EXPECT_TRUE(plan->task_parameters.empty());
}

TEST(OpenJdTest, ParameterValuesAreNeverReparsedAsFormatStrings) {
  const std::string text =
      OneStep("    script: {actions: {onRun: {command: echo, args: [\"{{Param.Msg}}\"]}}}\n",
              "parameterDefinitions: [{name: Msg, type: STRING}]\n");
  StatusOr<Translation> t =
      TranslateTemplate(text, Inputs({{"Msg", "{{Session.WorkingDirectory}}"}}));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  StatusOr<TaskPlan> plan = PlanTask(t->step_scenes.at("s"), 0, "/w");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->on_run.args, (std::vector<std::string>{"{{Session.WorkingDirectory}}"}));
}

TEST(OpenJdTest, ActionsKeepTimeoutsAndCancelation) {
  StatusOr<Translation> t = TranslateTemplate(kTemplate, Inputs());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  StatusOr<TaskPlan> plan = PlanTask(t->step_scenes.at("Render-Beauty"), 0, "/w");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->on_run.timeout_s, 3600);
  EXPECT_EQ(plan->on_run.cancel_mode, "NOTIFY_THEN_TERMINATE");
  EXPECT_EQ(plan->on_run.notify_period_s, 90);
  const EnvironmentPlan& env = plan->environments[0];
  EXPECT_EQ(env.on_enter->timeout_s, 0);  // onEnter: no timeout
  EXPECT_EQ(env.on_enter->cancel_mode, "TERMINATE");
  EXPECT_EQ(env.on_exit->timeout_s, 300);  // the spec's default for onExit
  EXPECT_EQ(env.on_exit->cancel_mode, "NOTIFY_THEN_TERMINATE");
  EXPECT_EQ(env.on_exit->notify_period_s, 30);  // the default outside onRun
  StatusOr<TaskPlan> encode = PlanTask(t->step_scenes.at("Encode"), 0, "/w");
  ASSERT_TRUE(encode.ok()) << encode.status().ToString();
  EXPECT_EQ(encode->on_run.args, (std::vector<std::string>{"-i", "sh010.%04d.exr"}));
  EXPECT_EQ(encode->on_run.timeout_s, 0);
}

TEST(OpenJdTest, ParameterValuesAreCheckedAgainstTheirDefinitions) {
  EXPECT_EQ(ErrorOf(kTemplate, {{"Frame", "1-5"}}),
            "parameter Frame: the template defines no such parameter (Shot, Frames, Scene, "
            "Samples, Exposure)");
  EXPECT_EQ(ErrorOf(kTemplate, {{"Samples", "12x"}}),
            "parameter Samples: '12x' is not an integer within 64 bits");
  EXPECT_EQ(ErrorOf(kTemplate, {{"Samples", "0"}}), "parameter Samples: 0 is below minValue 1");
  EXPECT_EQ(ErrorOf(kTemplate, {{"Samples", "5000"}}),
            "parameter Samples: 5000 is above maxValue 4096");
  EXPECT_EQ(ErrorOf(kTemplate, {{"Exposure", "2"}}),
            "parameter Exposure: '2' is not one of allowedValues (0.5, 1.5)");
  EXPECT_EQ(ErrorOf(kTemplate, {{"Exposure", "1.50"}}), "accepted");
  EXPECT_EQ(ErrorOf(kTemplate, {{"Shot", "s"}}),
            "parameter Shot: 1 characters, fewer than minLength 2");
  EXPECT_EQ(ErrorOf(kTemplate, {{"Frames", "1-5x"}}),
            "steps[0].parameterSpace.taskParameterDefinitions[0].range: '1-5x' is not an "
            "integer, a range 'A-B' or 'A-B:STEP'");
  const std::string needs = OneStep(kRun, "parameterDefinitions: [{name: Frames, type: INT}]\n");
  EXPECT_EQ(ErrorOf(needs),
            "parameter Frames: no value given (-p Frames=VALUE) and the template gives no "
            "default");
  EXPECT_EQ(ErrorOf(needs, {{"Frames", "12"}}), "accepted");
  EXPECT_EQ(ErrorOf(OneStep(kRun,
                            "parameterDefinitions: [{name: N, type: INT, default: 0, "
                            "minValue: 1}]\n")),
            "parameterDefinitions[0].default: 0 is below minValue 1");
  EXPECT_EQ(ErrorOf(OneStep(kRun, "parameterDefinitions: [{name: N, type: INT, minLength: 1}]\n")),
            "parameterDefinitions[0].minLength: unknown field (known fields: allowedValues, "
            "default, description, maxValue, minValue, name, type, userInterface)");
  EXPECT_EQ(ErrorOf(OneStep(kRun, "parameterDefinitions: [{name: 2x, type: INT}]\n")),
            "parameterDefinitions[0].name: '2x' is not an identifier (latin letters, digits and "
            "'_', not starting with a digit, at most 64)");
  EXPECT_EQ(ErrorOf(OneStep(kRun, "parameterDefinitions: [{name: B, type: BOOL}]\n")),
            "parameterDefinitions[0].type BOOL: needs the OpenJD extension EXPR, which Tessera "
            "does not support");
  EXPECT_EQ(ErrorOf(OneStep(kRun,
                            "parameterDefinitions: [{name: A, type: INT, default: 1}, "
                            "{name: A, type: INT, default: 2}]\n")),
            "parameterDefinitions[1].name: another parameter is named 'A'");
}

TEST(OpenJdTest, ReferencesOutsideTheirScopeAreRefusedNamingTheField) {
  const std::string params = "parameterDefinitions: [{name: P, type: PATH, default: a}]\n";
  // The job name is resolved at submission: Param.* and RawParam.* only, and not a PATH's Param.
  EXPECT_EQ(ErrorOf("specificationVersion: jobtemplate-2023-09\nname: \"{{Task.Param.F}}\"\n"
                    "steps: [{name: s, script: {actions: {onRun: {command: x}}}}]\n"),
            "name: {{Task.Param.F}}: Task.* is only available in a step's script");
  EXPECT_EQ(ErrorOf("specificationVersion: jobtemplate-2023-09\n"
                    "name: \"{{Session.WorkingDirectory}}\"\n"
                    "steps: [{name: s, script: {actions: {onRun: {command: x}}}}]\n"),
            "name: {{Session.WorkingDirectory}}: Session.* is only available in step scripts and "
            "environments (evaluated on the worker)");
  EXPECT_EQ(ErrorOf("specificationVersion: jobtemplate-2023-09\n" + params +
                    "name: \"{{Param.P}}\"\n"
                    "steps: [{name: s, script: {actions: {onRun: {command: x}}}}]\n"),
            "name: {{Param.P}}: P is a PATH parameter: Param.P (path-mapped) is only available "
            "in step scripts and environments; use RawParam.P");
  EXPECT_EQ(ErrorOf("specificationVersion: jobtemplate-2023-09\n" + params +
                    "name: \"{{RawParam.P}}\"\n"
                    "steps: [{name: s, script: {actions: {onRun: {command: x}}}}]\n"),
            "accepted");
  // An environment has no task.
  EXPECT_EQ(ErrorOf(OneStep("    stepEnvironments: [{name: e, variables: {F: "
                            "\"{{Task.Param.F}}\"}}]\n" +
                            kRun)),
            "steps[0].stepEnvironments[0].variables.F: {{Task.Param.F}}: Task.* is only "
            "available in a step's script");
  EXPECT_EQ(ErrorOf(OneStep("    script: {actions: {onRun: {command: \"{{Env.File.X}}\"}}}\n")),
            "steps[0].script.actions.onRun.command: {{Env.File.X}}: Env.File.* is only "
            "available in an environment");
  EXPECT_EQ(ErrorOf(OneStep("    script: {actions: {onRun: {command: x, args: "
                            "[\"{{Task.File.Nope}}\"]}}}\n")),
            "steps[0].script.actions.onRun.args[0]: {{Task.File.Nope}}: no embedded file named "
            "'Nope' in this script");
  EXPECT_EQ(ErrorOf(OneStep("    script: {actions: {onRun: {command: x, args: "
                            "[\"{{Task.Param.F}}\"]}}}\n")),
            "steps[0].script.actions.onRun.args[0]: {{Task.Param.F}}: no task parameter named "
            "'F' in this step");
  EXPECT_EQ(ErrorOf(OneStep("    script: {actions: {onRun: {command: x, args: "
                            "[\"{{Param.Nope}}\"]}}}\n")),
            "steps[0].script.actions.onRun.args[0]: {{Param.Nope}}: no job parameter named "
            "'Nope'");
  EXPECT_EQ(ErrorOf(OneStep("    script: {actions: {onRun: {command: \"{{ 1 + 2 }}\"}}}\n")),
            "steps[0].script.actions.onRun.command: {{ 1 + 2 }} is not a value reference like "
            "{{Param.Name}} (expressions need the OpenJD extension EXPR, which is not "
            "supported)");
  EXPECT_EQ(ErrorOf(OneStep("    script: {actions: {onRun: {command: \"{{Param.X\"}}}\n")),
            "steps[0].script.actions.onRun.command: '{{' at character 0 has no closing '}}'");
  // Ranges are resolved at submission: no task values there.
  EXPECT_EQ(
      ErrorOf(OneStep("    parameterSpace:\n      taskParameterDefinitions:\n"
                      "        - {name: F, type: INT, range: \"{{Session.WorkingDirectory}}\"}\n" +
                      kRun)),
      "steps[0].parameterSpace.taskParameterDefinitions[0].range: "
      "{{Session.WorkingDirectory}}: Session.* is only available in step scripts and "
      "environments (evaluated on the worker)");
}

TEST(OpenJdTest, RefusesWhatTesseraCannotRunByName) {
  EXPECT_EQ(ErrorOf("specificationVersion: jobtemplate-2023-09\nextensions: [TASK_CHUNKING]\n"
                    "name: j\nsteps: [{name: s, script: {actions: {onRun: {command: x}}}}]\n"),
            "extensions[0]: OpenJD extension TASK_CHUNKING is not supported");
  EXPECT_EQ(ErrorOf("specificationVersion: jobtemplate-2024-01\nname: j\nsteps: []\n"),
            "specificationVersion: 'jobtemplate-2024-01' is not supported (Tessera reads "
            "jobtemplate-2023-09)");
  EXPECT_EQ(ErrorOf(OneStep(kRun, "priority: 5\n")),
            "priority: unknown field (known fields: $schema, description, extensions, "
            "jobEnvironments, name, parameterDefinitions, specificationVersion, steps)");
  EXPECT_EQ(ErrorOf(OneStep("    let: [\"a = 1\"]\n" + kRun)),
            "steps[0].let: needs the OpenJD extension EXPR, which Tessera does not support");
  EXPECT_EQ(ErrorOf(OneStep("    script: {bash: {script: echo}}\n")),
            "steps[0].script.bash: needs the OpenJD extension FEATURE_BUNDLE_1, which Tessera "
            "does not support");
  EXPECT_EQ(ErrorOf(OneStep("    parameterSpace:\n      taskParameterDefinitions:\n"
                            "        - {name: F, type: \"CHUNK[INT]\", range: \"1-10\"}\n" +
                            kRun)),
            "steps[0].parameterSpace.taskParameterDefinitions[0].type CHUNK[INT]: needs the "
            "OpenJD extension TASK_CHUNKING, which Tessera does not support");
  EXPECT_EQ(ErrorOf(OneStep("    timeout: 5\n" + kRun)),
            "steps[0].timeout: unknown field (known fields: dependencies, description, "
            "hostRequirements, name, parameterSpace, script, stepEnvironments)");

  const std::string host = "    hostRequirements:\n      ";
  EXPECT_EQ(ErrorOf(OneStep(host +
                            "attributes: [{name: attr.worker.os.family, allOf: "
                            "[windows]}]\n" +
                            kRun)),
            "steps[0].hostRequirements.attributes[0].allOf: attr.worker.os.family must allow "
            "linux (every Tessera worker runs Linux)");
  EXPECT_EQ(ErrorOf(OneStep(host +
                            "attributes: [{name: attr.worker.os.family, anyOf: "
                            "[windows, macos]}]\n" +
                            kRun)),
            "steps[0].hostRequirements.attributes[0].anyOf: attr.worker.os.family must allow "
            "linux (every Tessera worker runs Linux)");
  EXPECT_EQ(
      ErrorOf(OneStep(host + "attributes: [{name: attr.worker.gpu.model, anyOf: [a]}]\n" + kRun)),
      "steps[0].hostRequirements.attributes[0].name: 'attr.worker.gpu.model' is in the scope "
      "attr.worker, which the specification reserves (attr.worker.os.family, cpu.arch are "
      "defined)");
  EXPECT_EQ(
      ErrorOf(OneStep(host + "amounts: [{name: amount.worker.disk.scratch, min: 10}]\n" + kRun)),
      "steps[0].hostRequirements.amounts[0].name: amount.worker.disk.scratch is not supported "
      "(Tessera does not reserve scratch disk)");
  EXPECT_EQ(ErrorOf(OneStep(host + "amounts: [{name: acme:amount.seats, min: 1}]\n" + kRun)),
            "steps[0].hostRequirements.amounts[0].name: vendor amount acme:amount.seats is not "
            "supported (custom amounts are amount.custom.<name>, the farm's named limits)");
  EXPECT_EQ(
      ErrorOf(OneStep(host + "amounts: [{name: amount.worker.vcpu, min: 1.5, max: 1.8}]\n" + kRun)),
      "steps[0].hostRequirements.amounts[0]: amount.worker.vcpu max 1.800000 cannot be "
      "expressed: Tessera reserves whole units, 2 (min rounded up), for each task");
  EXPECT_EQ(
      ErrorOf(OneStep(host + "amounts: [{name: amount.worker.vcpu, min: 2, max: 8}]\n" + kRun)),
      "accepted");
}

TEST(OpenJdTest, StepsAndEnvironmentsAreCheckedAsAWhole) {
  const std::string s = "script: {actions: {onRun: {command: x}}}";
  const std::string head = "specificationVersion: jobtemplate-2023-09\nname: j\n";
  EXPECT_EQ(ErrorOf(head + "steps:\n  - {name: a, " + s +
                    "}\n  - {name: b, dependencies: "
                    "[{dependsOn: c}], " +
                    s + "}\n"),
            "steps[1].dependencies[0].dependsOn: no step named 'c'");
  EXPECT_EQ(ErrorOf(head + "steps:\n  - {name: a, dependencies: [{dependsOn: a}], " + s + "}\n"),
            "steps[0].dependencies[0].dependsOn: step 'a' cannot depend on itself");
  EXPECT_EQ(ErrorOf(head + "steps:\n  - {name: a, dependencies: [{dependsOn: b}], " + s +
                    "}\n  - {name: b, dependencies: [{dependsOn: a}], " + s + "}\n"),
            "steps: the steps' dependencies form a cycle: a -> b -> a");
  EXPECT_EQ(ErrorOf(head + "steps:\n  - {name: a, " + s + "}\n  - {name: a, " + s + "}\n"),
            "steps[1].name: another step is named 'a'");
  EXPECT_EQ(ErrorOf(head +
                    "jobEnvironments: [{name: e, variables: {A: x}}, {name: e, "
                    "variables: {A: y}}]\nsteps: [{name: a, " +
                    s + "}]\n"),
            "jobEnvironments[1].name: another job environment is named 'e'");
  EXPECT_EQ(ErrorOf(head +
                    "jobEnvironments: [{name: e, variables: {A: x}}]\nsteps: [{name: a, "
                    "stepEnvironments: [{name: e, variables: {B: y}}], " +
                    s + "}]\n"),
            "steps[0].stepEnvironments[0].name: a job environment is also named 'e'");
  EXPECT_EQ(ErrorOf(head + "jobEnvironments: [{name: e, variables: {1A: x}}]\nsteps: [{name: a, " +
                    s + "}]\n"),
            "jobEnvironments[0].variables.1A: not a variable name (latin letters, digits and "
            "'_', not starting with a digit, at most 256)");
  EXPECT_EQ(ErrorOf(head + "jobEnvironments: [{name: e}]\nsteps: [{name: a, " + s + "}]\n"),
            "jobEnvironments[0]: an environment needs a script or variables");
  EXPECT_EQ(
      ErrorOf(OneStep("    script:\n      actions: {onRun: {command: x}}\n"
                      "      embeddedFiles: [{name: f, type: TEXT, filename: a/b, data: x}]\n")),
      "steps[0].script.embeddedFiles[0].filename: 'a/b' must be a file name, without "
      "folders");
  EXPECT_EQ(ErrorOf(OneStep("    script:\n      actions: {onRun: {command: x}}\n"
                            "      embeddedFiles: [{name: f, type: BINARY, data: x}]\n")),
            "steps[0].script.embeddedFiles[0].type: expected TEXT, got 'BINARY'");
  EXPECT_EQ(ErrorOf(OneStep("    script: {actions: {onRun: {command: x, timeout: 0}}}\n")),
            "steps[0].script.actions.onRun.timeout: must be 1..604800 seconds");
  EXPECT_EQ(ErrorOf(OneStep("    script: {actions: {onRun: {command: x, cancelation: "
                            "{mode: NOTIFY_THEN_TERMINATE, notifyPeriodInSeconds: 601}}}}\n")),
            "steps[0].script.actions.onRun.cancelation.notifyPeriodInSeconds: must be 1..600");
  EXPECT_EQ(ErrorOf(head + "steps:\n  - {name: a}\n"),
            "steps[0].script: required field is missing");
}

TEST(OpenJdTest, ParameterSpacesFollowTheSpec) {
  auto space = [](const std::string& defs, const std::string& combination = "") {
    return OneStep("    parameterSpace:\n      taskParameterDefinitions: " + defs + "\n" +
                   (combination.empty() ? "" : "      combination: \"" + combination + "\"\n") +
                   kRun);
  };
  auto values = [&](const std::string& range) -> std::vector<std::string> {
    StatusOr<Translation> t =
        TranslateTemplate(space("[{name: F, type: INT, range: \"" + range + "\"}]"), Inputs());
    if (!t.ok()) return {t.status().message()};
    std::vector<std::string> out;
    for (int64_t i = 0; i < t->task_count; ++i) {
      out.push_back(PlanTask(t->step_scenes.at("s"), i, "/w")->task_parameters[0].second);
    }
    return out;
  };
  // The spec's table (3.4.1.1.1): values in increasing order.
  using V = std::vector<std::string>;
  EXPECT_EQ(values("1 - 5"), (V{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(values("1 - -1"), (V{"1"}));
  EXPECT_EQ(values("-1 - 1"), (V{"-1", "0", "1"}));
  EXPECT_EQ(values("1-5:2"), (V{"1", "3", "5"}));
  EXPECT_EQ(values("10-15:2,1-5"), (V{"1", "2", "3", "4", "5", "10", "12", "14"}));
  EXPECT_EQ(values("1-10:4"), (V{"1", "5", "9"}));
  EXPECT_EQ(values("10-1:-4"), (V{"2", "6", "10"}));
  const std::string range = "steps[0].parameterSpace.taskParameterDefinitions[0].range";
  EXPECT_EQ(values("1-10:4,10-15"), (V{range + ": ranges overlap (1-10 and 10-15)"}));
  EXPECT_EQ(values("1-5:0"),
            (V{range + ": '1-5:0' is not an integer, a range 'A-B' or 'A-B:STEP'"}));
  EXPECT_EQ(values("1-1024").size(), 1024u);
  EXPECT_EQ(values("1-1025"),
            (V{range + ": more than 1024 values (the specification's most for "
                       "one task parameter; combine parameters for more tasks)"}));

  const std::string comb = "steps[0].parameterSpace.combination";
  const std::string three =
      "[{name: A, type: INT, range: [1, 2, 3]}, {name: B, type: INT, range: "
      "[10, 11, 12]}, {name: C, type: INT, range: [20, 21]}]";
  EXPECT_EQ(ErrorOf(space(three, "(A, C) * B")),
            comb + ": the members of (A, C) must have as many values each (A has 3, C has 2)");
  EXPECT_EQ(ErrorOf(space(three, "(A, B, A) * C")),
            comb + ": task parameter A appears more than once");
  EXPECT_EQ(ErrorOf(space(three, "A * B")),
            comb + ": task parameter C is missing (each must appear exactly once)");
  EXPECT_EQ(ErrorOf(space(three, "A * D")), comb + ": no task parameter named 'D'");
  EXPECT_EQ(ErrorOf(space(three, "A * (B, C")), comb + ": expected ',' or ')' at character 9");
  // (A, B) * C: the spec's example order.
  StatusOr<Translation> t = TranslateTemplate(space(three, "(A,B) * C"), Inputs());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->task_count, 6);
  StatusOr<TaskPlan> p3 = PlanTask(t->step_scenes.at("s"), 3, "/w");
  ASSERT_TRUE(p3.ok()) << p3.status().ToString();
  EXPECT_EQ(p3->task_parameters, (std::vector<std::pair<std::string, std::string>>{
                                     {"A", "2"}, {"B", "11"}, {"C", "21"}}));
  // No combination: the product in definition order, the last varying fastest.
  t = TranslateTemplate(space(three), Inputs());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->task_count, 18);
  StatusOr<TaskPlan> p = PlanTask(t->step_scenes.at("s"), 17, "/w");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->task_parameters, (std::vector<std::pair<std::string, std::string>>{
                                    {"A", "3"}, {"B", "12"}, {"C", "21"}}));
  p = PlanTask(t->step_scenes.at("s"), 1, "/w");
  EXPECT_EQ(p->task_parameters[2].second, "21");
  EXPECT_EQ(p->task_parameters[1].second, "10");
  // A product past a Tessera step's tasks is refused before anything is expanded.
  EXPECT_EQ(ErrorOf(space("[{name: A, type: INT, range: \"1-1000\"}, {name: B, type: INT, "
                          "range: \"1-1000\"}]")),
            comb + ": A * B makes more than 100000 tasks (the most a Tessera step runs)");
  EXPECT_EQ(ErrorOf(space("[{name: A, type: FLOAT, range: [\"1.5\", x]}]")),
            "steps[0].parameterSpace.taskParameterDefinitions[0].range[1]: 'x' is not a number");
  EXPECT_EQ(ErrorOf(space("[{name: A, type: STRING, range: \"a,b\"}]")),
            "steps[0].parameterSpace.taskParameterDefinitions[0].range: expected a list of "
            "values");
}

TEST(OpenJdTest, NamesBecomeUniqueTesseraNames) {
  const std::string s = "script: {actions: {onRun: {command: x}}}";
  StatusOr<Translation> t = TranslateTemplate(
      "specificationVersion: jobtemplate-2023-09\nname: \"Plan: café/1\"\nsteps:\n"
      "  - {name: \"a b\", " +
          s + "}\n  - {name: a-b, " + s + "}\n  - {name: \"a/b\", " + s +
          ", dependencies: [{dependsOn: a-b}]}\n",
      Inputs());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  YAML::Node job = YAML::Load(t->job_yaml);
  EXPECT_EQ(job["name"].as<std::string>(), "Plan--caf--1");  // one '-' per character
  EXPECT_EQ(job["steps"][0]["name"].as<std::string>(), "a-b");
  EXPECT_EQ(job["steps"][1]["name"].as<std::string>(), "a-b-2");
  EXPECT_EQ(job["steps"][2]["name"].as<std::string>(), "a-b-3");
  EXPECT_EQ(job["steps"][2]["depends_on"][0]["step"].as<std::string>(), "a-b-2");
  EXPECT_EQ(job["steps"][2]["scene"].as<std::string>(), "a-b-3.openjd.json");
}

TEST(OpenJdTest, TenThousandTasksTranslateWithoutExpanding) {
  // A task parameter has at most 1,024 values (the specification's limit): 10,000 tasks are a
  // product of two.
  StatusOr<Translation> t = TranslateTemplate(
      OneStep(
          "    parameterSpace:\n      taskParameterDefinitions:\n"
          "        - {name: Shot, type: INT, range: \"{{Param.Shots}}\"}\n"
          "        - {name: Frame, type: INT, range: \"{{Param.Frames}}\"}\n"
          "    script: {actions: {onRun: {command: render, args: [\"{{Task.Param.Shot}}\", "
          "\"{{Task.Param.Frame}}\"]}}}\n",
          "parameterDefinitions: [{name: Frames, type: STRING}, {name: Shots, type: STRING}]\n"),
      Inputs({{"Frames", "1-100"}, {"Shots", "1-100"}}));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->task_count, 10000);
  EXPECT_EQ(YAML::Load(t->job_yaml)["steps"][0]["frames"].as<std::string>(), "1-10000");
  EXPECT_LT(t->step_scenes.at("s").size(), 2000u);  // each range is one run, not its values
  StatusOr<TaskPlan> plan = PlanTask(t->step_scenes.at("s"), 9999, "/w");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->on_run.args, (std::vector<std::string>{"100", "100"}));
}

TEST(OpenJdTest, SessionsOfAnotherVersionOrShapeAreRefused) {
  StatusOr<Translation> t = TranslateTemplate(OneStep(kRun), Inputs());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  nlohmann::json session = nlohmann::json::parse(t->step_scenes.at("s"));
  ASSERT_TRUE(PlanTask(session.dump(), 0, "/w").ok());
  nlohmann::json v3 = session;
  v3["version"] = 3;
  EXPECT_EQ(PlanTask(v3.dump(), 0, "/w").status().message(),
            "openjd session: version 3 is not understood (this worker reads versions 1 and 2)");
  // A session of version 1 (a job stored before path mapping) still runs.
  nlohmann::json v1 = session;
  v1["version"] = 1;
  v1.erase("path_parameters");
  v1.erase("path_mapping");
  v1.erase("outputs");
  EXPECT_TRUE(PlanTask(v1.dump(), 0, "/w").ok());
  nlohmann::json extra = session;
  extra["chunks"] = 4;
  EXPECT_EQ(PlanTask(extra.dump(), 0, "/w").status().message(),
            "openjd session: unknown key 'chunks'");
  nlohmann::json bad_ref = session;
  bad_ref["script"]["on_run"]["command"] = nlohmann::json::parse(R"([{"ref": "Task.Param.X"}])");
  EXPECT_EQ(PlanTask(bad_ref.dump(), 0, "/w").status().message(),
            "script.on_run.command: no value for {{Task.Param.X}} here");
  EXPECT_EQ(PlanTask("{", 0, "/w").status().message(), "openjd session: not valid JSON");
  EXPECT_FALSE(PlanTask("[]", 0, "/w").ok());
}

TEST(OpenJdTest, TheJobFileIsATesseraPipeline) {
  StatusOr<Translation> t = TranslateTemplate(kTemplate, Inputs());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  StatusOr<spec::PipelineSpec> p = spec::ParsePipelineYaml(t->job_yaml);
  if (!p.ok() && p.status().message().find("openjd") != std::string::npos) {
    GTEST_SKIP() << "the job parser does not take renderer openjd yet: " << p.status().message();
  }
  ASSERT_TRUE(p.ok()) << p.status().ToString() << "\n" << t->job_yaml;
  ASSERT_EQ(p->steps.size(), 2u);
  EXPECT_EQ(p->steps[0].name, "Render-Beauty");
  EXPECT_EQ(p->steps[0].job.frame_end, 30);
  EXPECT_EQ(p->steps[0].job.resources.cpu_cores, 4);
  EXPECT_EQ(p->steps[1].depends_on[0].step, "Render-Beauty");
}

}  // namespace
}  // namespace tessera::openjd
