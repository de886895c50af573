// genesis-mem subcommands: how each one plugs into the command line.
//
// A subcommand is a file <name>_command.cpp in this directory that declares
// its options on a CLI11 subcommand and returns the function that runs it;
// the work itself is library code in src/debug/. main.cpp registers each
// subcommand with one line. Errors are typed exceptions (core/error.h):
// main.cpp turns InvalidArgumentError into exit status 2 and the rest into 1.
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

}  // namespace genesis::tools
