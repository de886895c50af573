// genesis-mem: the memory debugging command line (SPEC D7).
//
//   genesis-mem replay TRACE [--compare] [--config NAME]... [--json] ...
//
// Thin: each subcommand registers itself (command.h); errors become
// "genesis-mem: error: <message>" and exit status 2 (bad input) or 1.
#include <cstdio>
#include <exception>
#include <new>
#include <vector>

#include "command.h"
#include "genesis/core/error.h"

namespace {

int fail(const char* message, int status) {
  std::fprintf(stderr, "genesis-mem: error: %s\n", message);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"genesis-mem: look into GPU memory use (allocation traces, replays)", "genesis-mem"};
  app.require_subcommand(1);
  std::vector<genesis::tools::Command> commands;
  commands.push_back(genesis::tools::add_replay_command(app));
  // Later: profile, oom, leak, fragment, monitor, distributed, interactive.

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "genesis-mem: error: %s\nRun 'genesis-mem --help' (or 'genesis-mem replay --help').\n",
                 e.what());
    return 2;
  }

  try {
    for (const genesis::tools::Command& c : commands) {
      if (c.app->parsed()) return c.run();
    }
    return fail("no subcommand given (see --help)", 2);
  } catch (const genesis::InvalidArgumentError& e) {
    return fail(e.message().c_str(), 2);
  } catch (const genesis::Error& e) {
    return fail(e.message().c_str(), 1);
  } catch (const std::bad_alloc&) {
    return fail("out of host memory", 1);
  } catch (const std::exception& e) {
    return fail(e.what(), 1);
  }
}
