#include "terminal.h"

#include <cstring>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

namespace genesis::tools {

RawTerminal::RawTerminal() {
  if (!::isatty(STDIN_FILENO)) return;
  termios t{};
  if (::tcgetattr(STDIN_FILENO, &t) != 0) return;
  saved_.assign(reinterpret_cast<const char*>(&t), sizeof t);
  t.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
  t.c_cc[VMIN] = 0;
  t.c_cc[VTIME] = 0;
  active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0;
}

RawTerminal::~RawTerminal() {
  if (!active_) return;
  termios t{};
  std::memcpy(&t, saved_.data(), sizeof t);
  ::tcsetattr(STDIN_FILENO, TCSANOW, &t);
}

std::vector<KeyPress> RawTerminal::read_keys(int timeout_ms) {
  std::vector<KeyPress> keys;
  if (!active_) {
    if (timeout_ms > 0) ::usleep(static_cast<useconds_t>(timeout_ms) * 1000);
    return keys;
  }
  pollfd p{STDIN_FILENO, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return keys;
  char buf[256];
  const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
  for (ssize_t i = 0; i < n; ++i) {
    const char c = buf[i];
    KeyPress k;
    if (c == 'q' || c == 'Q' || c == 3 /* Ctrl-C without ISIG */) k.key = Key::kQuit;
    else if (c == '\t' || c == 'n' || c == 'l') k.key = Key::kNext;
    else if (c == 'N' || c == 'h') k.key = Key::kPrev;
    else if (c == ' ' || c == 'p') k.key = Key::kPause;
    else if (c == 's') k.key = Key::kSites;
    else if (c >= '0' && c <= '9') {
      k.key = Key::kDigit;
      k.digit = c - '0';
    } else if (c == 27 && i + 2 < n && buf[i + 1] == '[') {  // arrow keys: ESC [ A..D
      const char a = buf[i + 2];
      if (a == 'C' || a == 'B') k.key = Key::kNext;
      if (a == 'D' || a == 'A') k.key = Key::kPrev;
      i += 2;
    }
    if (k.key != Key::kNone) keys.push_back(k);
  }
  return keys;
}

int terminal_columns() noexcept {
  winsize w{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col >= 40) return w.ws_col;
  return 80;
}

}  // namespace genesis::tools
