// genesis-mem subcommands: how each one plugs into the command line.
//
// A subcommand is a file <name>_command.cpp in this directory that declares
// its options on a CLI11 subcommand and returns the function that runs it;
// the work itself is library code in src/debug/. cli.cpp registers each
// subcommand with one line. Errors are typed exceptions (core/error.h):
// cli.cpp turns InvalidArgumentError into exit status 2 and the rest into 1.
#pragma once

#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

namespace genesis::tools {

/// A registered subcommand: its CLI11 app (parsed() tells whether it was
/// chosen) and what to run then, returning the exit status.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// `genesis-mem replay TRACE ...` (replay_command.cpp).
Command add_replay_command(CLI::App& app);

/// `genesis-mem convert SNAPSHOT OUT` (convert_command.cpp).
Command add_convert_command(CLI::App& app);

/// `genesis-mem profile|oom|leak|fragment|monitor ...` (watch_commands.cpp).
std::vector<Command> add_watch_commands(CLI::App& app);

/// `genesis-mem interactive ...` (interactive_command.cpp).
Command add_interactive_command(CLI::App& app);

/// `genesis-mem exporter ...` (exporter_command.cpp).
Command add_exporter_command(CLI::App& app);

/// `genesis-mem distributed --role master|worker ...` (distributed_command.cpp).
Command add_distributed_command(CLI::App& app);

}  // namespace genesis::tools
