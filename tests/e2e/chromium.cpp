#include "tests/e2e/chromium.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <thread>

namespace tessera::e2e {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::seconds kCallTimeout{20};

std::string DecodeBase64(const std::string& text) {
  std::array<int, 256> value;
  value.fill(-1);
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < alphabet.size(); ++i) value[static_cast<uint8_t>(alphabet[i])] = i;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  int bits = 0, acc = 0;
  for (char c : text) {
    const int v = value[static_cast<uint8_t>(c)];
    if (v < 0) continue;  // padding and line breaks
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

bool Exited(pid_t pid, std::chrono::milliseconds within) {
  const auto deadline = Clock::now() + within;
  while (true) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

std::unique_ptr<HeadlessBrowser> HeadlessBrowser::Start(const std::string& profile_dir, int width,
                                                        int height, std::string* error) {
  // A browser that dies mid-write must fail the call, not kill the test with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  int to_browser[2], from_browser[2];
  if (pipe2(to_browser, O_CLOEXEC) != 0 || pipe2(from_browser, O_CLOEXEC) != 0) {
    *error = "pipe() failed";
    return nullptr;
  }
  std::unique_ptr<HeadlessBrowser> browser(new HeadlessBrowser());
  browser->log_path_ = profile_dir + "/chromium.log";
  const std::vector<std::string> args = {
      kChromiumPath,
      "--headless=new",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--no-first-run",
      "--no-default-browser-check",
      "--disable-extensions",
      "--disable-background-networking",
      "--hide-scrollbars",
      "--remote-debugging-pipe",
      "--user-data-dir=" + profile_dir + "/profile",
      "--window-size=" + std::to_string(width) + "," + std::to_string(height),
      "about:blank"};
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) {
    *error = "fork() failed";
    return nullptr;
  }
  if (pid == 0) {
    // Its own process group, so the browser's helpers (zygote, renderers) go with it.
    setpgid(0, 0);
    // The protocol's fixed descriptors: the browser reads commands on 3 and writes on 4. Moved
    // out of the way first so the dup2 calls cannot clobber each other; dup2 clears CLOEXEC.
    const int in = fcntl(to_browser[0], F_DUPFD_CLOEXEC, 10);
    const int out = fcntl(from_browser[1], F_DUPFD_CLOEXEC, 10);
    const int log = open(browser->log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int null = open("/dev/null", O_RDONLY);
    if (in < 0 || out < 0 || log < 0 || null < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 ||
        dup2(log, 2) < 0 || dup2(in, 3) < 0 || dup2(out, 4) < 0) {
      _exit(127);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  setpgid(pid, pid);  // also from here, whichever runs first
  close(to_browser[0]);
  close(from_browser[1]);
  browser->pid_ = pid;
  browser->to_browser_ = to_browser[1];
  browser->from_browser_ = from_browser[0];

  std::string why;
  std::optional<json> target =
      browser->Call("Target.createTarget", {{"url", "about:blank"}}, true, &why);
  if (!target) {
    *error = "chromium did not answer on its DevTools pipe: " + why + "\n" + browser->Log();
    return nullptr;
  }
  std::optional<json> attached =
      browser->Call("Target.attachToTarget",
                    {{"targetId", (*target)["targetId"]}, {"flatten", true}}, true, &why);
  if (!attached) {
    *error = "cannot attach to the page: " + why;
    return nullptr;
  }
  browser->session_ = (*attached)["sessionId"].get<std::string>();
  for (const char* domain : {"Page.enable", "Runtime.enable"}) {
    if (!browser->Call(domain, json::object(), false, &why)) {
      *error = std::string(domain) + ": " + why;
      return nullptr;
    }
  }
  browser->Call(
      "Emulation.setDeviceMetricsOverride",
      {{"width", width}, {"height", height}, {"deviceScaleFactor", 1}, {"mobile", false}});
  return browser;
}

HeadlessBrowser::~HeadlessBrowser() {
  if (pid_ > 0) {
    // Asked to close first, so it shuts its helpers down itself; whether it heard is seen below.
    const std::string close_message =
        json{{"id", next_id_++}, {"method", "Browser.close"}}.dump() + std::string(1, '\0');
    if (write(to_browser_, close_message.data(), close_message.size()) < 0) {
      // Already gone: reaped below.
    }
    if (!Exited(pid_, std::chrono::seconds(5))) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    kill(-pid_, SIGKILL);  // helpers that outlived the browser
  }
  if (to_browser_ >= 0) close(to_browser_);
  if (from_browser_ >= 0) close(from_browser_);
}

std::optional<json> HeadlessBrowser::Receive(Clock::time_point deadline) {
  while (true) {
    const size_t end = buffer_.find('\0');
    if (end != std::string::npos) {
      json message = json::parse(buffer_.substr(0, end), nullptr, false);
      buffer_.erase(0, end + 1);
      if (!message.is_discarded()) return message;
      continue;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{from_browser_, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    char bytes[65536];
    const ssize_t n = read(from_browser_, bytes, sizeof(bytes));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;  // the browser went away
    buffer_.append(bytes, static_cast<size_t>(n));
  }
}

void HeadlessBrowser::Note(const json& event) {
  const std::string method = event.value("method", "");
  const json& params = event.contains("params") ? event["params"] : json::object();
  if (method == "Runtime.exceptionThrown") {
    const json& details = params["exceptionDetails"];
    std::string text = details.value("text", "exception");
    if (details.contains("exception")) {
      text += ": " + details["exception"].value("description", "");
    }
    page_errors_.push_back(text);
  } else if (method == "Runtime.consoleAPICalled" && params.value("type", "") == "error") {
    std::string text = "console.error:";
    for (const json& arg : params["args"]) {
      text += " " + (arg.contains("value") ? arg["value"].dump() : arg.value("description", ""));
    }
    page_errors_.push_back(text);
  }
}

std::optional<json> HeadlessBrowser::Call(const std::string& method, const json& params,
                                          bool browser_level, std::string* error) {
  const int id = next_id_++;
  json message = {{"id", id}, {"method", method}, {"params", params}};
  if (!browser_level) message["sessionId"] = session_;
  const std::string wire = message.dump() + std::string(1, '\0');
  for (size_t sent = 0; sent < wire.size();) {
    const ssize_t n = write(to_browser_, wire.data() + sent, wire.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (error) *error = "the browser is gone";
      return std::nullopt;
    }
    sent += static_cast<size_t>(n);
  }
  const auto deadline = Clock::now() + kCallTimeout;
  while (std::optional<json> reply = Receive(deadline)) {
    if (!reply->contains("id")) {
      Note(*reply);
      continue;
    }
    if ((*reply)["id"] != id) continue;
    if (reply->contains("error")) {
      if (error) *error = (*reply)["error"].dump();
      return std::nullopt;
    }
    return reply->value("result", json::object());
  }
  if (error) *error = method + ": no answer within " + std::to_string(kCallTimeout.count()) + " s";
  return std::nullopt;
}

bool HeadlessBrowser::Navigate(const std::string& url) {
  std::optional<json> result = Call("Page.navigate", {{"url", url}});
  return result && !result->contains("errorText");
}

std::optional<json> HeadlessBrowser::Evaluate(const std::string& expression, std::string* error) {
  std::optional<json> result = Call(
      "Runtime.evaluate",
      {{"expression", expression}, {"returnByValue", true}, {"awaitPromise", true}}, false, error);
  if (!result) return std::nullopt;
  if (result->contains("exceptionDetails")) {
    if (error) *error = (*result)["exceptionDetails"].dump();
    return std::nullopt;
  }
  const json& value = (*result)["result"];
  return value.contains("value") ? value["value"] : json(nullptr);
}

bool HeadlessBrowser::WaitFor(const std::string& expression, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::string test = "!!(" + expression + ")";
  while (true) {
    std::optional<json> value = Evaluate(test);
    if (value && value->is_boolean() && value->get<bool>()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string HeadlessBrowser::Dom() {
  std::optional<json> html = Evaluate("document.documentElement.outerHTML");
  return html && html->is_string() ? html->get<std::string>() : "";
}

bool HeadlessBrowser::Screenshot(const std::string& png_path) {
  std::optional<json> shot = Call("Page.captureScreenshot", {{"format", "png"}});
  if (!shot || !shot->contains("data")) return false;
  std::ofstream out(png_path, std::ios::binary);
  out << DecodeBase64((*shot)["data"].get<std::string>());
  return static_cast<bool>(out);
}

std::string HeadlessBrowser::Log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace tessera::e2e
