#include "cuda_backend/fit.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "topology/error.hpp"

namespace collsim::backend {

double student_t975(std::size_t dof) {
  // Exact table values for small samples, where the normal approximation is poor.
  static constexpr std::array<double, 30> kTable = {
      12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
      2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
      2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (dof == 0) throw InternalError("student_t975 needs at least one degree of freedom");
  if (dof <= kTable.size()) return kTable[dof - 1];
  // Cornish-Fisher expansion around the normal quantile; error below 1e-4 for dof > 30.
  const double z = 1.959963984540054;
  const double v = static_cast<double>(dof);
  const double z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z;
  return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v) +
         (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v);
}

namespace {

struct Moments {
  double sw = 0, mx = 0, my = 0, sxx = 0, sxy = 0;
};

Moments moments(std::span<const double> x, std::span<const double> y,
                const std::vector<double>& w) {
  Moments m;
  double sx = 0, sy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    m.sw += w[i];
    sx += w[i] * x[i];
    sy += w[i] * y[i];
  }
  m.mx = sx / m.sw;
  m.my = sy / m.sw;
  for (std::size_t i = 0; i < x.size(); ++i) {
    m.sxx += w[i] * (x[i] - m.mx) * (x[i] - m.mx);
    m.sxy += w[i] * (x[i] - m.mx) * (y[i] - m.my);
  }
  return m;
}

// Weights 1 / t^2 from the given times; a non-positive time takes the smallest positive one.
void relative_weights(std::span<const double> t, std::vector<double>& w) {
  double floor = 0;
  for (double v : t)
    if (v > 0 && (floor == 0 || v < floor)) floor = v;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const double v = t[i] > 0 ? t[i] : (floor > 0 ? floor : 1.0);
    w[i] = 1.0 / (v * v);
  }
}

}  // namespace

LinearFit fit_line(std::span<const double> x, std::span<const double> y, FitWeighting weighting) {
  if (x.size() != y.size() || x.empty())
    throw InternalError("fit_line needs as many x as y values, and at least one");
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(x[i]) || !std::isfinite(y[i]))
      throw InternalError("fit_line was given a non-finite measurement");
  const std::size_t n = x.size();
  std::vector<double> w(n, 1.0);
  Moments m = moments(x, y, w);
  const double scale = std::max(std::abs(m.mx), 1.0);
  LinearFit fit;
  fit.points = n;
  // Relative spread of x below double precision means all x are the same size.
  fit.constant = !(m.sxx / m.sw > 1e-24 * scale * scale);
  auto solve = [&] {
    fit.beta = fit.constant ? 0.0 : m.sxy / m.sxx;
    fit.alpha = m.my - fit.beta * m.mx;
  };
  if (weighting == FitWeighting::relative) {
    // Weights from the measured times favour the points whose noise happened to be low, which
    // biases the fit; a second pass weights by the first pass's predictions instead.
    relative_weights(y, w);
    m = moments(x, y, w);
    solve();
    std::vector<double> predicted(n);
    for (std::size_t i = 0; i < n; ++i) predicted[i] = fit.alpha + fit.beta * x[i];
    relative_weights(predicted, w);
    m = moments(x, y, w);
  }
  solve();

  fit.residuals.resize(n);
  double ss = 0, wss = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double r = y[i] - (fit.alpha + fit.beta * x[i]);
    fit.residuals[i] = r;
    ss += r * r;
    wss += w[i] * r * r;
    if (y[i] > 0)
      fit.max_relative_residual = std::max(fit.max_relative_residual, std::abs(r) / y[i]);
  }
  fit.residual_rms = std::sqrt(ss / static_cast<double>(n));

  const std::size_t params = fit.constant ? 1 : 2;
  if (n > params) {
    const double s2 = wss / static_cast<double>(n - params);  // variance at unit weight
    const double t = student_t975(n - params);
    if (fit.constant) {
      fit.alpha_ci95 = t * std::sqrt(s2 / m.sw);
    } else {
      fit.beta_ci95 = t * std::sqrt(s2 / m.sxx);
      fit.alpha_ci95 = t * std::sqrt(s2 * (1.0 / m.sw + m.mx * m.mx / m.sxx));
    }
  }
  return fit;
}

}  // namespace collsim::backend
