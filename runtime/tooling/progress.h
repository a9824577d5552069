// The one progress display of the tools (bench, train): a bar redrawn in
// place, dots, periodic lines, or nothing. Part of the tooling layer; depends
// on nothing of the runtime.
#ifndef BT_RUNTIME_TOOLING_PROGRESS_H
#define BT_RUNTIME_TOOLING_PROGRESS_H

#include <chrono>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace bt::rt {

/// Progress of one task: `done` of `total` units (e.g. generated tokens).
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

/// Progress output on one stream, in one of the modes
///   "bar"   the current line followed by `[####----] text`, redrawn in place
///           (carriage return, erase to end of line) at most every 100 ms;
///   "dots"  " [" and one dot per tenth of the task, "]" at its end;
///   "lines" the task's text on a line of its own, at most every 5 s;
///   "none"  no task progress and no messages.
/// "auto" is "bar" when stderr is a terminal, else `auto_fallback`.
/// Text given to Print / NewLine is written in every mode (bench's setting
/// and call lines); Message is not written in "none".
class ProgressDisplay {
public:
  ProgressDisplay(std::ostream &os, std::string mode,
                  std::string auto_fallback = "lines");

  /// The mode after resolving "auto".
  const std::string &mode() const { return mode_; }

  /// Appends `s` to the current line (a bar is drawn after it).
  void Print(std::string_view s);
  /// Ends the current line.
  void NewLine();
  /// `m` on a line of its own (an open bar line is ended first); nothing in
  /// "none".
  void Message(std::string_view m);

  /// Starts a task on the current line: resets the dots, the bar and the
  /// clock of its ETA.
  void BeginTask();
  /// The task's progress: `done` of `total` (ignored if total <= 0); `text`
  /// follows the bar ("bar") or is the line ("lines"). `force` draws even
  /// within the redraw interval.
  void Update(int64_t done, int64_t total, std::string_view text,
              bool force = false);
  /// BeginTask, and a callback that shows "done/total <unit>, ETA Ns" for
  /// the task; nullptr unless the mode is "bar" or "dots" (the caller then
  /// skips the progress reports).
  ProgressFn TaskCallback(std::string unit);
  /// After a task: removes its bar (the current line is redrawn without it)
  /// or closes its dots with "]".
  void EndTask();
  /// Leaves an open bar on screen and ends its line.
  void Finish();

private:
  std::ostream &os_;
  std::string mode_;
  std::string line_;  // the current line's text, for bar redraws
  bool started_ = false; // the task has drawn something
  bool bar_open_ = false; // a bar is on the current line
  int dots_ = 0;
  std::chrono::steady_clock::time_point begin_, last_draw_;
};

/// `seconds` rounded to whole seconds: "1h02m", "3m04s" or "12s"; "?" for a
/// negative, non-finite or absurd (> 1e8 s) value.
std::string FormatDuration(double seconds);
/// A rate per second: "12.3k" from 1e4 up, else a whole number ("934").
std::string FormatRate(double per_second);

} // namespace bt::rt

#endif // BT_RUNTIME_TOOLING_PROGRESS_H
