// Robust trend fitting shared by the OOM predictor and the leak detector.
//
// Note [Robust growth]: memory of a training job is a sawtooth (each step
// allocates activations and frees them), with spikes and a warm-up. A least
// squares line through raw samples follows all of that. Both detectors
// instead cut the time into windows, keep one extreme per window (maxima for
// the OOM predictor: a job runs out of memory at its peaks; minima for the
// leak detector: a leak raises the troughs) and fit a Theil-Sen line through
// those extremes: the median of the slopes of all pairs, which one outlying
// window cannot move (with k windows, an outlier touches k-1 of k(k-1)/2
// pairs). The share of pairwise slopes that agree with the median is the
// fit's consistency, a basis for the confidence the reports give.
#pragma once

#include <cstddef>
#include <vector>

namespace genesis::debug::detail {

struct TimedValue {
  double t = 0;  ///< seconds
  double y = 0;  ///< bytes
};

struct RobustSlope {
  double slope = 0;        ///< bytes per second (median pairwise slope)
  double consistency = 0;  ///< share of pairs in [0, 1] that agree with the median
  std::size_t points = 0;
};

/// Theil-Sen fit. A pair agrees when its slope is within
/// 0.5 * |median| + abs_tolerance of the median. Fewer than two points give
/// a zero slope with zero consistency.
RobustSlope theil_sen(const std::vector<TimedValue>& points, double abs_tolerance);

/// The extreme (maximum when `maxima`, else minimum) of each of `windows`
/// equal time windows over [t_begin, t_end], at the time it occurred;
/// windows without points are left out. `points` must be in time order.
std::vector<TimedValue> window_extremes(const std::vector<TimedValue>& points, double t_begin,
                                        double t_end, std::size_t windows, bool maxima);

}  // namespace genesis::debug::detail
