#include "report_format.h"

#include <cmath>
#include <cstdio>

namespace genesis::tools {

std::string format_bytes(std::uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : "%.1f %s", v, kUnits[u]);
  return buf;
}

std::string format_seconds(double s) {
  char buf[48];
  if (!std::isfinite(s)) return "never";
  if (s < 60) std::snprintf(buf, sizeof buf, s < 10 ? "%.2f s" : "%.1f s", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%d min %d s", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof buf, "%d h %d min", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
  return buf;
}

std::string format_percent(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", p);
  return buf;
}

}  // namespace genesis::tools
