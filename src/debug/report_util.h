// Helpers shared by the debugger's report and text writers (src/debug/report_*.cpp,
// the replay and corpus tables, the OOM predictor's advice).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "genesis/debug/sample_history.h"

namespace genesis::debug::detail {

/// Bytes per GiB, for figures reported in GiB.
inline constexpr double kGiB = 1073741824.0;

/// `v` with `decimals` digits after the point ("%.*f").
std::string format_fixed(double v, int decimals);

/// Rows of cells as text: the first column left-aligned, the others
/// right-aligned, no trailing spaces; a row of one cell is a section label
/// across the table (it does not widen the columns).
std::string render_table(const std::vector<std::vector<std::string>>& rows);

/// At most about `max_points` buckets, each a merge of neighbours (all of
/// them when max_points is 0 or there are fewer).
std::vector<SampleBucket> thin_buckets(const std::vector<SampleBucket>& buckets, std::size_t max_points);

/// `j` as JSON text (`indent` -1: one line). Bytes that are not UTF-8 (a
/// file name is any bytes on Linux) become U+FFFD instead of failing the
/// whole report.
std::string json_text(const nlohmann::json& j, int indent = -1);

/// The wall-clock time now as "2024-05-01T12:00:00Z".
std::string utc_timestamp();

}  // namespace genesis::debug::detail
