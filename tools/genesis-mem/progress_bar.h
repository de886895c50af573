// A one-line progress bar on stderr for long genesis-mem runs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace genesis::tools {

/// True when stderr is a terminal (where a progress bar belongs).
bool stderr_is_terminal() noexcept;

/// Draws "label [#####-----]  50%  n/total" on stderr, redrawn in place
/// (carriage return) at most once per permille, and erased by finish() or
/// the destructor so that it never mixes with the report. A disabled bar
/// does nothing. Not thread-safe.
class ProgressBar {
 public:
  ProgressBar(std::string label, bool enabled) : label_(std::move(label)), enabled_(enabled) {}
  ~ProgressBar() { finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(std::uint64_t done, std::uint64_t total);
  /// Erases the bar.
  void finish();

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::int64_t last_permille_ = -1;
  std::size_t width_ = 0;  // characters of the last drawing
};

}  // namespace genesis::tools
