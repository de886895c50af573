// A one-line progress bar on stderr (progress_bar.h).
#include "progress_bar.h"

#include <cstdio>

#include <unistd.h>

namespace genesis::tools {

bool stderr_is_terminal() noexcept { return isatty(fileno(stderr)) == 1; }

void ProgressBar::update(std::uint64_t done, std::uint64_t total) {
  if (!enabled_ || total == 0) return;
  const auto permille = static_cast<std::int64_t>(done >= total ? 1000 : done * 1000 / total);
  if (permille == last_permille_) return;
  last_permille_ = permille;
  constexpr int kBar = 30;
  const auto filled = static_cast<int>(permille * kBar / 1000);
  std::string line = "\r" + label_ + " [" + std::string(static_cast<std::size_t>(filled), '#') +
                     std::string(static_cast<std::size_t>(kBar - filled), '-') + "] ";
  char tail[96];
  std::snprintf(tail, sizeof tail, "%5.1f%%  %llu/%llu events", static_cast<double>(permille) / 10.0,
                static_cast<unsigned long long>(done), static_cast<unsigned long long>(total));
  line += tail;
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  drawn_ = true;
  width_ = line.size();
}

void ProgressBar::finish() {
  if (!drawn_) return;
  std::string blank(width_ + 1, ' ');
  blank.front() = '\r';
  blank.back() = '\r';
  std::fputs(blank.c_str(), stderr);
  std::fflush(stderr);
  drawn_ = false;
  last_permille_ = -1;
}

}  // namespace genesis::tools
