// Open Job Description (shared/openjd/openjd.h) beyond the steps: job parameters with their user
// interface hints, PATH values joined with the submitter's folders, environment templates and
// how their parameters merge, path mapping rules, host requirements as Tessera needs, and
// templates checked without values (`tessera check`). Cases follow the 2023-09 schemas and the
// specification's conformance suite.

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <string>

#include "shared/base/yaml_util.h"
#include "shared/openjd/openjd.h"

namespace tessera::openjd {
namespace {

JobInputs Inputs(const std::map<std::string, std::string>& params = {}) {
  JobInputs inputs;
  inputs.parameters = params;
  inputs.template_dir = "/bundles/shot";
  inputs.working_dir = "/home/ana/work";
  return inputs;
}

const std::string kRun =
    "steps:\n  - name: s\n    script: {actions: {onRun: {command: run, args: "
    "[\"{{Param.P}}\", \"{{RawParam.P}}\"]}}}\n";

// A template with one parameter definition (a flow map's contents) and a step that prints it.
std::string WithParam(const std::string& definition) {
  return "specificationVersion: jobtemplate-2023-09\nname: j\nparameterDefinitions:\n  - {" +
         definition + "}\n" + kRun;
}

std::string Checked(const std::string& text) {
  Status s = CheckTemplate(text);
  return s.ok() ? "accepted" : s.message();
}

std::string Made(const std::string& text, const JobInputs& inputs) {
  StatusOr<Translation> t = TranslateTemplate(text, inputs);
  return t.ok() ? "accepted" : t.status().message();
}

// The onRun arguments of task 0 of step `step`.
std::vector<std::string> RunArgs(const Translation& t, const std::string& step = "s",
                                 const std::vector<PathMappingRule>& worker_rules = {}) {
  StatusOr<TaskPlan> plan = PlanTask(t.step_scenes.at(step), 0, "/w", worker_rules);
  if (!plan.ok()) return {plan.status().message()};
  return plan->on_run.args;
}

TEST(OpenJdParamsTest, AUserInterfaceBlockIsReadAndChecked) {
  // The template that broke every GUI-facing job template: a userInterface block on a PATH
  // parameter without fileFilters threw yaml-cpp's "invalid node" from an optional key.
  const std::string one_liner =
      "specificationVersion: jobtemplate-2023-09\nname: T\nparameterDefinitions:\n"
      "- {name: D, type: PATH, objectType: DIRECTORY, dataFlow: INOUT, userInterface: "
      "{control: CHOOSE_DIRECTORY, label: Data}}\nsteps:\n- name: A\n  script: {actions: {onRun: "
      "{command: bash, args: [\"-c\", \"true\"]}}}\n";
  EXPECT_EQ(Checked(one_liner), "accepted");
  EXPECT_EQ(Made(one_liner, Inputs({{"D", "data"}})), "accepted");

  const std::string ui = "parameterDefinitions[0].userInterface";
  EXPECT_EQ(Checked(WithParam("name: P, type: STRING, userInterface: {control: SPIN_BOX}")),
            ui + ".control: 'SPIN_BOX' is not a control for a STRING parameter (DROPDOWN_LIST, "
                 "HIDDEN, LINE_EDIT, MULTILINE_EDIT, CHECK_BOX)");
  EXPECT_EQ(Checked(WithParam("name: P, type: STRING, allowedValues: [a, b], userInterface: "
                              "{control: LINE_EDIT}")),
            ui + ".control: LINE_EDIT cannot be used with allowedValues (use DROPDOWN_LIST)");
  EXPECT_EQ(Checked(WithParam("name: P, type: INT, userInterface: {control: DROPDOWN_LIST}")),
            ui + ".control: DROPDOWN_LIST needs the parameter's allowedValues");
  EXPECT_EQ(Checked(WithParam("name: P, type: STRING, allowedValues: [On, oFF], userInterface: "
                              "{control: CHECK_BOX}")),
            "accepted");
  EXPECT_EQ(Checked(WithParam("name: P, type: STRING, allowedValues: [yes, off], userInterface: "
                              "{control: CHECK_BOX}")),
            ui + ".control: CHECK_BOX needs allowedValues of two values, true/false, yes/no, "
                 "on/off or 1/0 (any case), got [yes, off]");
  // File filters belong to the file dialogs; the default control of a FILE input is one.
  EXPECT_EQ(Checked(WithParam("name: P, type: PATH, objectType: FILE, userInterface: "
                              "{fileFilters: [{label: Scenes, patterns: ['*.blend', '*']}], "
                              "fileFilterDefault: {label: All, patterns: ['*.*']}}")),
            "accepted");
  EXPECT_EQ(Checked(WithParam("name: P, type: PATH, userInterface: {fileFilters: [{label: X, "
                              "patterns: ['*.txt']}]}")),
            ui + ".fileFilters: only for the file dialogs CHOOSE_INPUT_FILE and "
                 "CHOOSE_OUTPUT_FILE, the control is CHOOSE_DIRECTORY");
  EXPECT_EQ(Checked(WithParam("name: P, type: PATH, objectType: FILE, userInterface: "
                              "{fileFilters: [{label: X, patterns: ['*.[ab]']}]}")),
            ui + ".fileFilters[0].patterns[0]: '*.[ab]' is not a file filter ('*', '*.*' or "
                 "'*.ext', at most 20 characters, no path separators or wildcards in the "
                 "extension)");
  EXPECT_EQ(Checked(WithParam("name: P, type: FLOAT, userInterface: {decimals: 2, "
                              "singleStepDelta: 0.25}")),
            "accepted");
  EXPECT_EQ(Checked(WithParam("name: P, type: INT, userInterface: {singleStepDelta: 0.5}")),
            ui + ".singleStepDelta: expected an integer, got '0.5'");
  EXPECT_EQ(Checked(WithParam("name: P, type: INT, userInterface: {decimals: 2}")),
            ui + ".decimals: unknown field (known fields: control, groupLabel, label, "
                 "singleStepDelta)");
  EXPECT_EQ(Checked(WithParam("name: P, type: FLOAT, userInterface: {control: HIDDEN, "
                              "singleStepDelta: 1}")),
            ui + ".singleStepDelta: only for a SPIN_BOX, the control is HIDDEN");
  EXPECT_EQ(Checked(WithParam("name: P, type: STRING, userInterface: {label: \"a\\tb\"}")),
            ui + ".label: holds a control character");
}

TEST(OpenJdParamsTest, ValuesFollowTheirTypes) {
  EXPECT_EQ(Checked(WithParam("name: P, type: INT, default: \"007\"")), "accepted");
  StatusOr<Translation> t =
      TranslateTemplate(WithParam("name: P, type: INT, default: \"007\""), Inputs());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(RunArgs(*t), (std::vector<std::string>{"7", "7"}));  // base 10, no leading zeros
  EXPECT_EQ(Checked(WithParam("name: P, type: INT, default: 9223372036854775808")),
            "parameterDefinitions[0].default: '9223372036854775808' is not an integer within "
            "64 bits");
  EXPECT_EQ(Checked(WithParam("name: P, type: FLOAT, default: .nan")),
            "parameterDefinitions[0].default: '.nan' is not a finite number");
  EXPECT_EQ(Checked(WithParam("name: P, type: FLOAT, default: 0x10")),
            "parameterDefinitions[0].default: '0x10' is not a finite number");
  EXPECT_EQ(Checked(WithParam("name: P, type: INT, allowedValues: null")),
            "parameterDefinitions[0].allowedValues: expected a list of at least one value");
  // A FLOAT keeps the text it was given, compared by value.
  t = TranslateTemplate(WithParam("name: P, type: FLOAT, allowedValues: ['1.5', '04.5']"),
                        Inputs({{"P", "4.50"}}));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(RunArgs(*t), (std::vector<std::string>{"4.50", "4.50"}));
}

TEST(OpenJdParamsTest, PathValuesAreJoinedWithTheSubmittersFolders) {
  auto args = [](const std::string& definition, const std::map<std::string, std::string>& p) {
    StatusOr<Translation> t = TranslateTemplate(WithParam(definition), Inputs(p));
    return t.ok() ? RunArgs(*t) : std::vector<std::string>{t.status().message()};
  };
  using V = std::vector<std::string>;
  // A default is the template's folder's; it may walk up only inside it.
  EXPECT_EQ(args("name: P, type: PATH, default: inputs/scene", {}),
            (V{"/bundles/shot/inputs/scene", "/bundles/shot/inputs/scene"}));
  EXPECT_EQ(args("name: P, type: PATH, default: ./a/./../b/.", {}),
            (V{"/bundles/shot/b", "/bundles/shot/b"}));
  EXPECT_EQ(args("name: P, type: PATH, default: .", {}), (V{"/bundles/shot", "/bundles/shot"}));
  EXPECT_EQ(args("name: P, type: PATH, default: a/../..", {}),
            (V{"parameter P: the default 'a/../..' leaves the template's folder"}));
  EXPECT_EQ(args("name: P, type: PATH, default: /tmp/out", {}),
            (V{"parameter P: the default '/tmp/out' is absolute; a PATH default is relative to "
               "the template's folder"}));
  // Checked after the join: the joined path is what must be short enough or allowed.
  EXPECT_EQ(args("name: P, type: PATH, default: a, maxLength: 3", {}),
            (V{"parameter P: 15 characters, more than maxLength 3"}));
  EXPECT_EQ(args("name: P, type: PATH, default: c/a, allowedValues: [c/a, c/b]", {}),
            (V{"parameter P: '/bundles/shot/c/a' is not one of allowedValues (c/a, c/b)"}));
  // A given value is the submitter's, from where they stood; it may walk up.
  EXPECT_EQ(args("name: P, type: PATH", {{"P", "../x/./y"}}),
            (V{"/home/ana/x/y", "/home/ana/x/y"}));
  EXPECT_EQ(args("name: P, type: PATH", {{"P", "s3://bucket/key"}}),
            (V{"/home/ana/work/s3:/bucket/key", "/home/ana/work/s3:/bucket/key"}));
  EXPECT_EQ(args("name: P, type: PATH", {{"P", "/abs/path"}}), (V{"/abs/path", "/abs/path"}));
  // Without the folders a relative PATH cannot be made absolute: refused, naming it.
  JobInputs bare;
  bare.parameters = {{"P", "rel"}};
  EXPECT_EQ(Made(WithParam("name: P, type: PATH"), bare),
            "parameter P: 'rel' is relative, and the submission gives no working folder to join "
            "it with");
  EXPECT_EQ(Made(WithParam("name: P, type: PATH, default: d"), JobInputs()),
            "parameter P: the default 'd' is relative to the template's folder, which the "
            "submission does not give");
}

TEST(OpenJdParamsTest, ArgumentsMaySpanLines) {
  const std::string text =
      "specificationVersion: jobtemplate-2023-09\nname: j\nsteps:\n  - name: s\n    script:\n"
      "      actions:\n        onRun:\n          command: python\n          args:\n"
      "            - -c\n            - |\n              import os\n              print(1)\n";
  StatusOr<Translation> t = TranslateTemplate(text, Inputs());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(RunArgs(*t), (std::vector<std::string>{"-c", "import os\nprint(1)\n"}));
  // Other control characters stay refused, in arguments and in the command.
  EXPECT_EQ(Made("specificationVersion: jobtemplate-2023-09\nname: j\nsteps:\n  - name: s\n"
                 "    script: {actions: {onRun: {command: run, args: [\"a\\x07b\"]}}}\n",
                 Inputs()),
            "steps[0].script.actions.onRun.args[0]: holds a control character (other than a line "
            "break or tab)");
  EXPECT_EQ(Made("specificationVersion: jobtemplate-2023-09\nname: j\nsteps:\n  - name: s\n"
                 "    script: {actions: {onRun: {command: \"a\\nb\"}}}\n",
                 Inputs()),
            "steps[0].script.actions.onRun.command: holds a control character");
}

}  // namespace
}  // namespace tessera::openjd
