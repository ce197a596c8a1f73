#pragma once
// Real headless Chromium for end-to-end tests of the dashboard, driven over the DevTools protocol
// on a pipe (--remote-debugging-pipe): load a page, evaluate JavaScript in it, wait for a
// condition, read its DOM, take screenshots. A long-lived fetch (the dashboard's event stream)
// never stalls it, unlike --dump-dom with --virtual-time-budget, which waits for the network to
// go quiet, and timings read in the page are real time.
//
// Threads: one test thread drives a HeadlessBrowser.

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tessera::e2e {

inline constexpr const char* kChromiumPath = "/usr/bin/chromium";

class HeadlessBrowser {
 public:
  // Starts Chromium with a fresh profile in `profile_dir` (its log goes there too) and one page
  // with a width x height viewport. Returns nullptr, with the reason in *error, when it does not
  // start.
  static std::unique_ptr<HeadlessBrowser> Start(const std::string& profile_dir, int width,
                                                int height, std::string* error);
  ~HeadlessBrowser();  // closes the browser, then kills what is left of its process group
  HeadlessBrowser(const HeadlessBrowser&) = delete;
  HeadlessBrowser& operator=(const HeadlessBrowser&) = delete;

  // Loads `url`; a change of the fragment alone navigates within the page, as a click would.
  bool Navigate(const std::string& url);
  // Evaluates a JavaScript expression in the page (awaiting it when it is a promise) and returns
  // its value as JSON; nullopt, with the exception in *error, when it throws.
  std::optional<nlohmann::json> Evaluate(const std::string& expression,
                                         std::string* error = nullptr);
  // Polls `expression` until it is truthy; false on timeout.
  bool WaitFor(const std::string& expression, std::chrono::milliseconds timeout);
  // The rendered document (what `chromium --dump-dom` prints).
  std::string Dom();
  // A PNG of the viewport.
  bool Screenshot(const std::string& png_path);
  // Uncaught exceptions and console.error() calls in the page so far.
  const std::vector<std::string>& page_errors() const { return page_errors_; }
  std::string Log() const;

 private:
  HeadlessBrowser() = default;
  // Sends a DevTools command (to the page's session unless `browser_level`) and waits for its
  // answer; nullopt on an error answer (in *error), a dead browser or a timeout.
  std::optional<nlohmann::json> Call(const std::string& method, const nlohmann::json& params,
                                     bool browser_level = false, std::string* error = nullptr);
  // The next message from the browser, or nullopt at the deadline or when it went away.
  std::optional<nlohmann::json> Receive(std::chrono::steady_clock::time_point deadline);
  void Note(const nlohmann::json& event);

  pid_t pid_ = -1;
  int to_browser_ = -1;
  int from_browser_ = -1;
  std::string session_;
  int next_id_ = 1;
  std::string buffer_;
  std::string log_path_;
  std::vector<std::string> page_errors_;
};

}  // namespace tessera::e2e
