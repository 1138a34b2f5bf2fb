#pragma once
// Least-squares fit of a start-up cost and a per-unit cost: t = alpha + beta * x.
//
// Timings across a size sweep span several orders of magnitude and their noise grows with the
// time measured, so the fit minimises relative residuals by default (weights 1 / t^2); otherwise
// the largest sizes would decide alpha alone. Both weightings are deterministic.
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace collsim::backend {

enum class FitWeighting { relative, absolute };

struct LinearFit {
  double alpha = 0;  // intercept (seconds)
  double beta = 0;   // slope (seconds per unit of x)
  // Half-widths of the 95% confidence intervals (Student's t with n - 2 degrees of freedom);
  // empty when there are too few points to estimate them.
  std::optional<double> alpha_ci95;
  std::optional<double> beta_ci95;
  std::vector<double> residuals;     // t_i - (alpha + beta x_i), seconds, in input order
  double residual_rms = 0;           // root mean square of the residuals, seconds
  double max_relative_residual = 0;  // max |residual_i| / t_i
  std::size_t points = 0;
  bool constant = false;  // every x was equal: beta is 0 and alpha is the (weighted) mean
};

// Fits y = alpha + beta x. Needs at least one point; x and y must have the same length and hold
// finite values (InternalError otherwise: callers pass measured data).
LinearFit fit_line(std::span<const double> x, std::span<const double> y,
                   FitWeighting weighting = FitWeighting::relative);

// The 0.975 quantile of Student's t distribution with `dof` degrees of freedom (dof >= 1).
double student_t975(std::size_t dof);

}  // namespace collsim::backend
