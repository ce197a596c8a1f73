// Accepting a job (scheduler/api/submission.h): the job file in the body is parsed once, whatever
// it is (a job, a job with steps, an OpenJD template), and each scene once; the checked job that
// is stored carries its spec, as the broker is to be handed it.

#include "scheduler/api/submission.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "scheduler/store/store.h"
#include "shared/base/yaml_util.h"
#include "shared/plugins/plugin_catalog.h"
#include "tests/support/scenes.h"

namespace tessera::api {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kTemplate = R"(specificationVersion: jobtemplate-2023-09
name: render
parameterDefinitions: [{name: Frames, type: STRING, default: "1-5"}]
steps:
  - name: Render
    parameterSpace:
      taskParameterDefinitions: [{name: Frame, type: INT, range: "{{Param.Frames}}"}]
    script: {actions: {onRun: {command: /bin/true}}}
)";

class SubmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/tessera-submission-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    fs::create_directories(dir_ / "out");
    StatusOr<std::unique_ptr<store::Store>> store = store::Store::Open((dir_ / "data").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    // What a scheduler reads once whatever it is sent: the renderers it has.
    ASSERT_FALSE(plugin::BuiltinPlugins().empty());
  }
  void TearDown() override {
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  SubmitContext Context() {
    return SubmitContext{*store_, limits_, nullptr, (dir_ / "out").string(), {}, false, nullptr};
  }

  // Stores `body` as a job; returns the YAML documents parsed on the way.
  int64_t DocumentsParsed(const json& body, CheckedJob* checked) {
    const int64_t before = yaml::DocumentsParsedOnThisThread();
    StatusOr<store::JobRecord> rec =
        SubmitJob(Context(), body.dump(), security::Caller{}, nullptr, checked);
    EXPECT_TRUE(rec.ok()) << rec.status().ToString();
    return yaml::DocumentsParsedOnThisThread() - before;
  }

  fs::path dir_;
  std::map<std::string, int> limits_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(SubmissionTest, AJobIsParsedOnceAndItsSceneOnce) {
  CheckedJob checked;
  EXPECT_EQ(DocumentsParsed({{"job_yaml", "name: a\nrenderer: noop\nframes: 1-4\n"}}, &checked), 1);
  ASSERT_NE(checked.job(), nullptr);
  EXPECT_EQ(checked.job()->frame_end, 4);
  EXPECT_EQ(DocumentsParsed({{"job_yaml", "name: b\nscene: scene.yaml\nframes: 1-2\ntiles: 2x1\n"},
                             {"scene_yaml", testing::TinySceneYaml(16, 12, 1)}},
                            &checked),
            2);
  ASSERT_NE(checked.job(), nullptr);
  EXPECT_EQ(checked.job()->parts.size(), 2u) << "split with the scene's size, from its one parse";
}

TEST_F(SubmissionTest, AJobWithStepsIsParsedOnceStepsIncluded) {
  const std::string job_yaml =
      "name: shot\nframes: 1-4\nsteps:\n"
      "  - {name: sim, renderer: noop, chunk_size: 2}\n"
      "  - {name: render, scene: scene.yaml, depends_on: [{step: sim, per_frame: true}]}\n"
      "  - {name: cleanup, renderer: noop, frames: '1', depends_on: [{step: render}]}\n";
  CheckedJob checked;
  EXPECT_EQ(DocumentsParsed({{"job_yaml", job_yaml},
                             {"step_scenes", {{"render", testing::TinySceneYaml(16, 12, 1)}}}},
                            &checked),
            2);
  ASSERT_NE(checked.pipeline(), nullptr);
  ASSERT_EQ(checked.pipeline()->steps.size(), 3u);
  EXPECT_EQ(checked.pipeline()->steps[1].name, "render");
  EXPECT_EQ(checked.job_yaml, job_yaml);
}

// What the broker is handed is what the store holds: the rows and tasks it created and the
// scene stored, so the broker need not read the job back.
TEST_F(SubmissionTest, TheBrokerIsHandedWhatWasStored) {
  const std::string scene = testing::TinySceneYaml(16, 12, 1);
  broker::SubmittedJob submitted;
  StatusOr<store::JobRecord> rec =
      SubmitJob(Context(),
                json{{"job_yaml", "name: b\nscene: scene.yaml\nframes: 1-2\ntiles: 2x1\n"},
                     {"scene_yaml", scene}}
                    .dump(),
                security::Caller{}, nullptr, nullptr, &submitted);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(submitted.id, rec->id);
  ASSERT_EQ(submitted.jobs.size(), 1u);
  EXPECT_EQ(submitted.jobs[0].output_dir, rec->output_dir);
  EXPECT_EQ(submitted.scenes.at(rec->id), *store_->JobScene(rec->id));
  StatusOr<std::vector<store::TaskRecord>> tasks =
      store_->LoadUnfinishedTasks(rec->id, /*requeue_running=*/false);
  ASSERT_TRUE(tasks.ok()) << tasks.status().ToString();
  ASSERT_EQ(submitted.tasks.size(), tasks->size());
  ASSERT_EQ(submitted.tasks.size(), 4u) << "two frames of two tiles";
  for (size_t i = 0; i < tasks->size(); ++i) {
    const store::TaskRecord &handed = submitted.tasks[i], &read = (*tasks)[i];
    EXPECT_EQ(handed.id, read.id);
    EXPECT_EQ(handed.job_id, read.job_id);
    EXPECT_EQ(handed.index, read.index);
    EXPECT_EQ(handed.frame_start, read.frame_start);
    EXPECT_EQ(handed.frame_end, read.frame_end);
    EXPECT_EQ(nlohmann::json(handed.part), nlohmann::json(read.part));
  }

  // A job with steps: its steps' rows, in the order stored, each with its scene.
  broker::SubmittedJob steps;
  rec = SubmitJob(Context(),
                  json{{"job_yaml",
                        "name: shot\nframes: 1-2\nrenderer: noop\nsteps:\n  - {name: a}\n"
                        "  - {name: b, depends_on: [{step: a}]}\n"}}
                      .dump(),
                  security::Caller{}, nullptr, nullptr, &steps);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  ASSERT_EQ(steps.jobs.size(), 2u);
  EXPECT_EQ(steps.jobs[0].step, "a");
  EXPECT_EQ(steps.jobs[1].step, "b");
  EXPECT_EQ(steps.scenes.size(), 2u);
  EXPECT_EQ(steps.tasks.size(), 4u);
}

// The template is parsed once; its translation, a job with steps, is read as a document.
TEST_F(SubmissionTest, ATemplateIsParsedOnceTranslationIncluded) {
  CheckedJob checked;
  EXPECT_EQ(DocumentsParsed({{"job_yaml", kTemplate}}, &checked), 1);
  ASSERT_NE(checked.pipeline(), nullptr);
  ASSERT_EQ(checked.pipeline()->steps.size(), 1u);
  EXPECT_EQ(checked.pipeline()->steps[0].job.renderer, spec::kRendererOpenJd);
  EXPECT_EQ(checked.pipeline()->steps[0].job.frame_end, 5);
  EXPECT_NE(checked.job_yaml.find("renderer: openjd"), std::string::npos) << checked.job_yaml;
  // A dry run checks the same way.
  const int64_t before = yaml::DocumentsParsedOnThisThread();
  StatusOr<CheckedJob> dry =
      CheckSubmission(Context(), json{{"job_yaml", kTemplate}}.dump(), security::Caller{}, true);
  ASSERT_TRUE(dry.ok()) << dry.status().ToString();
  EXPECT_EQ(yaml::DocumentsParsedOnThisThread() - before, 1);
  EXPECT_EQ(DryRunView(*dry)["tasks"], 5);
}

// Refusals are the job file parsers' own, whatever the kind.
TEST_F(SubmissionTest, RefusalsNameTheFieldAsBefore) {
  const auto refusal = [&](const json& body) {
    StatusOr<CheckedJob> checked = CheckSubmission(Context(), body.dump(), security::Caller{});
    return checked.ok() ? std::string("ok") : checked.status().message();
  };
  EXPECT_EQ(refusal({{"job_yaml", "name: a\nrenderer: noop\nframes: 3-1\n"}}),
            "frames: start 3 is after end 1");
  EXPECT_EQ(refusal({{"job_yaml",
                      "name: a\nframes: 1\nsteps:\n  - {name: x, renderer: noop, "
                      "depends_on: [{step: y}]}\n"}}),
            "steps[0].depends_on[0].step: no step named 'y' (x)");
  EXPECT_EQ(refusal({{"job_yaml", "specificationVersion: environment-2023-09\n"}}),
            spec::ParseJobYaml("specificationVersion: environment-2023-09\n").status().message());
  EXPECT_EQ(refusal({{"job_yaml", "name: a\nrenderer: noop\nframes: 1\n"},
                     {"parameters", json::object()}}),
            "body: parameters, environments, template_dir, working_dir, path_mapping_rules, "
            "job_options and attachments are for Open Job Description templates only");
}

}  // namespace
}  // namespace tessera::api
