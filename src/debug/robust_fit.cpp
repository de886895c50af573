#include "robust_fit.h"

#include <algorithm>
#include <cmath>

namespace genesis::debug::detail {

RobustSlope theil_sen(const std::vector<TimedValue>& points, double abs_tolerance) {
  RobustSlope fit;
  fit.points = points.size();
  if (points.size() < 2) return fit;
  std::vector<double> slopes;
  slopes.reserve(points.size() * (points.size() - 1) / 2);
  for (std::size_t i = 0; i < points.size(); ++i) {
    for (std::size_t j = i + 1; j < points.size(); ++j) {
      const double dt = points[j].t - points[i].t;
      if (dt > 0) slopes.push_back((points[j].y - points[i].y) / dt);
    }
  }
  if (slopes.empty()) return fit;
  const std::size_t mid = slopes.size() / 2;
  std::nth_element(slopes.begin(), slopes.begin() + static_cast<std::ptrdiff_t>(mid), slopes.end());
  double median = slopes[mid];
  if (slopes.size() % 2 == 0) {
    const double lower = *std::max_element(slopes.begin(), slopes.begin() + static_cast<std::ptrdiff_t>(mid));
    median = (median + lower) / 2;
  }
  const double tol = 0.5 * std::fabs(median) + abs_tolerance;
  std::size_t agree = 0;
  for (double s : slopes) agree += std::fabs(s - median) <= tol ? 1 : 0;
  fit.slope = median;
  fit.consistency = static_cast<double>(agree) / static_cast<double>(slopes.size());
  return fit;
}

std::vector<TimedValue> window_extremes(const std::vector<TimedValue>& points, double t_begin,
                                        double t_end, std::size_t windows, bool maxima) {
  std::vector<TimedValue> out;
  if (points.empty() || windows == 0 || !(t_end > t_begin)) return out;
  const double width = (t_end - t_begin) / static_cast<double>(windows);
  std::size_t current = static_cast<std::size_t>(-1);
  for (const TimedValue& p : points) {
    if (p.t < t_begin || p.t > t_end) continue;
    const std::size_t w = std::min(windows - 1, static_cast<std::size_t>((p.t - t_begin) / width));
    if (w != current) {
      out.push_back(p);
      current = w;
    } else if (maxima ? p.y > out.back().y : p.y < out.back().y) {
      out.back() = p;
    }
  }
  return out;
}

}  // namespace genesis::debug::detail
