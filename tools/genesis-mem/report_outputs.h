// What a genesis-mem watching command writes when it ends: the JSON report,
// PNG plots, the HTML page, the Chrome trace, and the summary for people.
#pragma once

#include <cstdio>
#include <string>

#include "genesis/debug/memory_debugger.h"

namespace genesis::tools {

struct Outputs {
  std::string kind;              ///< "profile", "oom", ... (default file names)
  std::string json_path;         ///< empty: none
  std::string html_path;         ///< empty: none
  std::string chrome_trace_path; ///< empty: none
  bool plot = false;             ///< PNG next to json_path, or genesis-mem-<kind>.png
};

/// Throws InvalidArgumentError naming `path` when a file cannot be created
/// there (checked before watching, so a typo does not cost a long run). The
/// check leaves no file behind.
void check_writable(const std::string& path);

/// Throws InvalidArgumentError when two outputs would be written to one file
/// (-o r.json --html r.json; -o r.png --plot, whose plot is r.png), or an
/// output to the trace being read (`input`, empty when there is none): the
/// later write would silently replace the earlier one, or the trace itself.
void check_distinct_outputs(const Outputs& outputs, const std::string& input);

/// Writes every output asked for. Each failure is printed as one error line
/// and the others are still written; returns 0, or 2 when something could
/// not be written (bad path, full disk), 1 when the plots could not be drawn.
int write_outputs(const Outputs& outputs, const std::string& report_json, const debug::MemoryDebugger& debugger);

/// The summary of `kind` ("profile", "oom", "leak", "fragment", "status")
/// for people.
void print_summary(const std::string& kind, const debug::MemoryDebugger& debugger, std::FILE* out);

/// Where genesis_mem_plot.py is: $GENESIS_MEM_PLOT_SCRIPT, next to the
/// executable, or in ../share/genesis beside it. Empty when not found.
std::string find_plot_script();

}  // namespace genesis::tools
