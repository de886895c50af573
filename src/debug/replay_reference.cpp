// Reference figures read from a JSON file next to the trace
// (replay_reference.h, Note [Reference figures]).
#include "genesis/debug/replay_reference.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "genesis/core/error.h"

namespace genesis::debug {

namespace {

using json = nlohmann::json;

// A JSON value's type in words, with its article, for errors: "an object",
// "a number", "null".
std::string type_name(const json& v) {
  const std::string t = v.type_name();
  if (t == "null") return t;
  return (t == "object" || t == "array" ? "an " : "a ") + t;
}

double non_negative_number(const json& entry, const char* key, std::string_view origin, std::size_t i,
                           bool required) {
  const auto it = entry.find(key);
  if (it == entry.end()) {
    GENESIS_CHECK(!required, "reference file '", origin, "': results[", i, "] has no \"", key,
                  "\" (expected a number >= 0)");
    return 0;
  }
  GENESIS_CHECK(it->is_number(), "reference file '", origin, "': results[", i, "].", key, " is ",
                type_name(*it), " (expected a number >= 0)");
  const double v = it->get<double>();
  GENESIS_CHECK(v >= 0, "reference file '", origin, "': results[", i, "].", key, " is ", v,
                " (expected a number >= 0)");
  return v;
}

}  // namespace

std::string reference_path_for(std::string_view trace_path) {
  return std::string(trace_path) + ".reference.json";
}

ReferenceFigures parse_reference_figures(std::string_view text, std::string_view origin) {
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    GENESIS_THROW(InvalidArgumentError, "reference file '", origin, "' is not valid JSON (", e.what(),
                  "); expected an object {\"label\": ..., \"results\": [...]}");
  }
  GENESIS_CHECK(doc.is_object(), "reference file '", origin, "' holds ", type_name(doc),
                "; expected an object {\"label\": ..., \"results\": [...]}");

  ReferenceFigures figures;
  figures.label = std::string(kDefaultReferenceLabel);
  if (const auto label = doc.find("label"); label != doc.end()) {
    GENESIS_CHECK(label->is_string(), "reference file '", origin, "': \"label\" is ", type_name(*label),
                  " (expected a string)");
    if (!label->get_ref<const std::string&>().empty()) figures.label = label->get<std::string>();
  }
  const auto results = doc.find("results");
  GENESIS_CHECK(results != doc.end(), "reference file '", origin,
                "' has no \"results\" (expected an array of {\"allocator\", \"peak_reserved_bytes\", "
                "\"reserved_per_live\", \"ns_per_event\"})");
  GENESIS_CHECK(results->is_array() && !results->empty(), "reference file '", origin, "': \"results\" is ",
                results->is_array() ? std::string("an empty array") : type_name(*results),
                " (expected a non-empty array)");
  for (std::size_t i = 0; i < results->size(); ++i) {
    const json& entry = (*results)[i];
    GENESIS_CHECK(entry.is_object(), "reference file '", origin, "': results[", i, "] is ", type_name(entry),
                  " (expected an object)");
    ReferenceResult r;
    const auto allocator = entry.find("allocator");
    GENESIS_CHECK(allocator != entry.end() && allocator->is_string() &&
                      !allocator->get_ref<const std::string&>().empty(),
                  "reference file '", origin, "': results[", i,
                  "] needs \"allocator\", a non-empty string naming what was measured");
    r.allocator = allocator->get<std::string>();
    const auto peak = entry.find("peak_reserved_bytes");
    GENESIS_CHECK(peak != entry.end() && peak->is_number_integer() &&
                      (peak->is_number_unsigned() || peak->get<std::int64_t>() >= 0),
                  "reference file '", origin, "': results[", i,
                  "] needs \"peak_reserved_bytes\", an integer >= 0 (bytes)");
    r.peak_reserved_bytes = peak->is_number_unsigned() ? peak->get<std::uint64_t>()
                                                       : static_cast<std::uint64_t>(peak->get<std::int64_t>());
    r.reserved_per_live = non_negative_number(entry, "reserved_per_live", origin, i, true);
    r.ns_per_event = non_negative_number(entry, "ns_per_event", origin, i, false);
    figures.results.push_back(std::move(r));
  }
  return figures;
}

std::optional<ReferenceFigures> load_reference_figures(std::string_view trace_path) {
  if (trace_path.empty() || trace_path == "-") return std::nullopt;
  const std::string path = reference_path_for(trace_path);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    // Only "there is no such file" means "no reference figures"; a file that
    // is there but cannot be looked at is an error like any unreadable file.
    if (errno != ENOENT && errno != ENOTDIR) GENESIS_THROW_FILE(path, errno, "cannot read reference file '", path, "'");
    return std::nullopt;
  }
  GENESIS_CHECK(S_ISREG(st.st_mode), "reference file '", path, "' is not a regular file");
  GENESIS_CHECK(st.st_size <= (std::int64_t{16} << 20), "reference file '", path, "' is ", st.st_size,
                " bytes (expected a small JSON file, at most 16 MiB)");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) GENESIS_THROW_FILE(path, errno != 0 ? errno : EIO, "cannot read reference file '", path, "'");
  std::ostringstream text;
  text << in.rdbuf();
  GENESIS_CHECK(!in.bad(), "cannot read reference file '", path, "'");
  return parse_reference_figures(text.str(), path);
}

}  // namespace genesis::debug
