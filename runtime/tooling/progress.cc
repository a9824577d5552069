// The tools' progress display (progress.h).
#include "bt/runtime/tooling/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_format.h"

namespace bt::rt {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kBarInterval = std::chrono::milliseconds(100);
constexpr auto kLineInterval = std::chrono::seconds(5);
constexpr int kBarWidth = 24;

} // namespace

ProgressDisplay::ProgressDisplay(std::ostream &os, std::string mode,
                                 std::string auto_fallback)
    : os_(os), mode_(std::move(mode)) {
  if (mode_ == "auto")
    mode_ = isatty(STDERR_FILENO) ? "bar" : std::move(auto_fallback);
}

void ProgressDisplay::Print(std::string_view s) {
  os_ << s << std::flush;
  line_ += s;
}

void ProgressDisplay::NewLine() {
  os_ << "\n" << std::flush;
  line_.clear();
  bar_open_ = false;
}

void ProgressDisplay::Message(std::string_view m) {
  if (mode_ == "none")
    return;
  if (bar_open_)
    NewLine();
  Print(m);
  NewLine();
}

void ProgressDisplay::BeginTask() {
  started_ = false;
  dots_ = 0;
  begin_ = Clock::now();
}

void ProgressDisplay::Update(int64_t done, int64_t total, std::string_view text,
                             bool force) {
  if (total <= 0 || mode_ == "none")
    return;
  const double f = std::clamp(
      static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0);
  if (mode_ == "dots") {
    if (!started_) {
      Print(" [");
      started_ = true;
    }
    const int want = static_cast<int>(f * 10);
    if (want > dots_) {
      Print(std::string(want - dots_, '.'));
      dots_ = want;
    }
    return;
  }
  const auto now = Clock::now();
  const auto interval = mode_ == "bar"
                            ? std::chrono::duration_cast<Clock::duration>(kBarInterval)
                            : std::chrono::duration_cast<Clock::duration>(kLineInterval);
  if (started_ && !force && done < total && now - last_draw_ < interval)
    return;
  started_ = true;
  last_draw_ = now;
  if (mode_ == "lines") {
    os_ << text << "\n" << std::flush;
    return;
  }
  const int fill = static_cast<int>(f * kBarWidth);
  os_ << "\r" << line_ << (line_.empty() ? "[" : " [")
      << std::string(fill, '#') << std::string(kBarWidth - fill, '-') << "] "
      << text << "\x1b[K" << std::flush;
  bar_open_ = true;
}

ProgressFn ProgressDisplay::TaskCallback(std::string unit) {
  BeginTask();
  if (mode_ != "bar" && mode_ != "dots")
    return nullptr;
  return [this, unit = std::move(unit)](int64_t done, int64_t total) {
    if (total <= 0)
      return;
    const double f = std::clamp(
        static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0);
    std::string text = absl::StrFormat("%d/%d %s", done, total, unit);
    if (mode_ == "bar" && f > 0 && done < total) {
      const double elapsed =
          std::chrono::duration<double>(Clock::now() - begin_).count();
      text += absl::StrFormat(", ETA %.0fs", elapsed * (1 - f) / f);
    }
    Update(done, total, text);
  };
}

void ProgressDisplay::EndTask() {
  if (!started_)
    return;
  started_ = false;
  if (mode_ == "bar") {
    os_ << "\r" << line_ << "\x1b[K" << std::flush;
    bar_open_ = false;
  } else if (mode_ == "dots") {
    Print("]");
  }
}

void ProgressDisplay::Finish() {
  if (bar_open_)
    NewLine();
}

std::string FormatDuration(double s) {
  if (!(s >= 0) || s > 1e8)
    return "?";
  const int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600)
    return absl::StrFormat("%dh%02dm", t / 3600, (t / 60) % 60);
  if (t >= 60)
    return absl::StrFormat("%dm%02ds", t / 60, t % 60);
  return absl::StrFormat("%ds", t);
}

std::string FormatRate(double r) {
  return r >= 1e4 ? absl::StrFormat("%.1fk", r / 1e3) : absl::StrFormat("%.0f", r);
}

} // namespace bt::rt
