// The terminal under `genesis-mem interactive`: raw keys without echo, the
// screen size, and restoring the terminal however the command ends.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace genesis::tools {

/// Keys the live view understands.
enum class Key { kNone, kQuit, kNext, kPrev, kPause, kSites, kDigit };

struct KeyPress {
  Key key = Key::kNone;
  int digit = 0;  ///< for kDigit
};

/// While alive, standard input is in raw mode (no echo, no line buffering)
/// when it is a terminal; the old mode comes back in the destructor.
class RawTerminal {
 public:
  RawTerminal();
  ~RawTerminal();
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

  /// True when standard input is a terminal (keys can be read).
  bool interactive() const noexcept { return active_; }
  /// Waits at most `timeout_ms` for input and returns every key in it, in
  /// order: keys typed together (or pasted, or an arrow's escape sequence
  /// followed by a letter) arrive in one read, and a key left unparsed
  /// would be lost, so `q` typed right after `s` must still quit.
  std::vector<KeyPress> read_keys(int timeout_ms);

 private:
  bool active_ = false;
  std::string saved_;  // struct termios, as bytes
};

/// Columns of the terminal on standard output (80 when unknown).
int terminal_columns() noexcept;

}  // namespace genesis::tools
