// genesis-mem's front: registers the subcommands, maps errors onto exit
// statuses and one-line messages, and checks that standard output was
// really written (a full disk must not look like success).
#include "cli.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "command.h"
#include "genesis/core/error.h"
#include "genesis/version.h"

namespace genesis::tools {

namespace {

int fail(std::string_view message, int status) {
  // Messages may quote user input: keep them to one printable line of
  // bounded length so that a binary trace line cannot flood the terminal.
  std::string line;
  for (char c : message) {
    if (line.size() >= 600) {
      line += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') line += "; ";
    else if (u < 0x20 || u == 0x7f) line += '?';
    else line += c;
  }
  std::fprintf(stderr, "genesis-mem: error: %s\n", line.c_str());
  return status;
}

// Standard output is where reports and tables go: a write error there is the
// command's failure, reported once at the end.
int check_stdout(int status) {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    const int err = errno;
    std::fprintf(stderr, "genesis-mem: error: cannot write to standard output: %s\n",
                 err != 0 ? std::strerror(err) : "write error");
    return status == 0 ? 2 : status;
  }
  return status;
}

}  // namespace

const char* genesis_mem_version() noexcept { return "genesis-mem " GENESIS_VERSION_STRING; }

int genesis_mem_main(int argc, char** argv) {
  CLI::App app{"genesis-mem: watch, explain and replay GPU memory use", "genesis-mem"};
  app.set_version_flag("--version", genesis_mem_version());
  app.require_subcommand(1);
  std::vector<Command> commands;
  commands.push_back(add_replay_command(app));
  commands.push_back(add_convert_command(app));
  for (Command& c : add_watch_commands(app)) commands.push_back(std::move(c));
  commands.push_back(add_interactive_command(app));
  commands.push_back(add_exporter_command(app));
  commands.push_back(add_distributed_command(app));

  // CLI11 answers an unknown first word with "A subcommand is required",
  // which hides the typo: name it and what exists instead.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string_view word = argv[1];
    bool known = false;
    std::string names;
    for (const Command& c : commands) {
      known = known || c.app->get_name() == word;
      names += (names.empty() ? "" : ", ") + c.app->get_name();
    }
    if (!known) {
      return fail("unknown command '" + std::string(word) + "': expected one of " + names +
                      " (genesis-mem --help describes them)",
                  2);
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return check_stdout(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return check_stdout(app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return check_stdout(app.exit(e));
  } catch (const CLI::ParseError& e) {
    std::string which = "genesis-mem --help";
    for (const Command& c : commands) {
      if (c.app->parsed()) which = "genesis-mem " + c.app->get_name() + " --help";
    }
    return fail(std::string(e.what()) + " (see '" + which + "')", 2);
  }

  int status = 0;
  try {
    status = 2;
    for (const Command& c : commands) {
      if (c.app->parsed()) {
        status = c.run();
        break;
      }
    }
  } catch (const genesis::InvalidArgumentError& e) {
    status = fail(e.message(), 2);
  } catch (const genesis::Error& e) {
    status = fail(e.message(), 1);
  } catch (const std::bad_alloc&) {
    status = fail("out of host memory", 1);
  } catch (const std::exception& e) {
    status = fail(e.what(), 1);
  }
  return check_stdout(status);
}

}  // namespace genesis::tools
