#include "cuda_backend/fit.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

using namespace collsim::backend;

TEST_CASE("fit: a noiseless line is recovered exactly", "[backend][fit]") {
  // t = 5 us + x / (1 GB/s) at five sizes.
  const double alpha = 5e-6, beta = 1e-9;
  std::vector<double> x = {0, 1000, 2000, 4000, 8000}, y;
  for (double v : x) y.push_back(alpha + beta * v);
  for (auto weighting : {FitWeighting::relative, FitWeighting::absolute}) {
    const auto f = fit_line(x, y, weighting);
    CHECK(f.alpha == Approx(alpha).epsilon(1e-9));
    CHECK(f.beta == Approx(beta).epsilon(1e-9));
    CHECK(f.residual_rms < 1e-15);
    REQUIRE(f.beta_ci95.has_value());
    CHECK(*f.beta_ci95 < 1e-9 * beta);
    CHECK(f.points == 5);
    CHECK_FALSE(f.constant);
  }
}

TEST_CASE("fit: confidence intervals follow the textbook formulas", "[backend][fit]") {
  // x = 0, 1, 2 and y = 1, 3, 2 (unweighted): mean x 1, mean y 2, Sxx 2, Sxy 1, so beta = 0.5
  // and alpha = 1.5. Residuals -0.5, 1, -0.5: SS = 1.5 with 1 degree of freedom, s^2 = 1.5.
  // se(beta) = sqrt(1.5 / 2) = 0.8660; se(alpha) = sqrt(1.5 (1/3 + 1/2)) = 1.1180;
  // t(0.975, 1) = 12.706: half-widths 11.004 and 14.206.
  const std::vector<double> x = {0, 1, 2}, y = {1, 3, 2};
  const auto f = fit_line(x, y, FitWeighting::absolute);
  CHECK(f.beta == Approx(0.5));
  CHECK(f.alpha == Approx(1.5));
  CHECK(f.residuals[0] == Approx(-0.5));
  CHECK(f.residuals[1] == Approx(1.0));
  CHECK(f.residual_rms == Approx(std::sqrt(1.5 / 3)));
  CHECK(*f.beta_ci95 == Approx(12.706 * std::sqrt(0.75)).epsilon(1e-6));
  CHECK(*f.alpha_ci95 == Approx(12.706 * std::sqrt(1.25)).epsilon(1e-6));
}

TEST_CASE("fit: noisy sweeps recover alpha and beta within their intervals", "[backend][fit]") {
  // 10 us start-up and 100 GB/s over 4 KiB .. 64 MiB, ten repetitions each, with +-2% uniform
  // multiplicative noise. std::mt19937 is specified bit for bit, so every seed below gives the
  // same data on every platform. A 95% interval must cover the truth in about 95% of the 200
  // trials; below 88% would mean the intervals are too narrow (binomial sd is 1.5%).
  const double alpha = 10e-6, beta = 1e-11;
  int alpha_covered = 0, beta_covered = 0;
  double worst_alpha = 0, worst_beta = 0, widest_alpha = 0, widest_beta = 0;
  constexpr int kTrials = 200;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::mt19937 rng(1000 + trial);
    std::vector<double> x, y;
    for (double size = 4096; size <= 64.0 * 1024 * 1024; size *= 4)
      for (int rep = 0; rep < 10; ++rep) {
        const double u = static_cast<double>(rng()) / 4294967295.0;  // [0, 1]
        x.push_back(size);
        y.push_back((alpha + beta * size) * (1.0 + 0.04 * (u - 0.5)));
      }
    const auto f = fit_line(x, y);
    if (std::abs(f.alpha - alpha) <= *f.alpha_ci95) ++alpha_covered;
    if (std::abs(f.beta - beta) <= *f.beta_ci95) ++beta_covered;
    worst_alpha = std::max(worst_alpha, std::abs(f.alpha - alpha) / alpha);
    worst_beta = std::max(worst_beta, std::abs(f.beta - beta) / beta);
    widest_alpha = std::max(widest_alpha, *f.alpha_ci95 / alpha);
    widest_beta = std::max(widest_beta, *f.beta_ci95 / beta);
    CHECK(f.max_relative_residual < 0.03);
  }
  INFO("coverage alpha " << alpha_covered << ", beta " << beta_covered << " of " << kTrials);
  CHECK(alpha_covered >= 176);
  CHECK(beta_covered >= 176);
  // Every estimate is within 2% and every interval narrower than 2% for this much data.
  CHECK(worst_alpha < 0.02);
  CHECK(worst_beta < 0.02);
  CHECK(widest_alpha < 0.02);
  CHECK(widest_beta < 0.02);

  // Deterministic: the same data give the same bits.
  const std::vector<double> x = {1, 2, 3, 5}, y = {1.1, 2.05, 2.9, 5.2};
  CHECK(fit_line(x, y).beta == fit_line(x, y).beta);
}

TEST_CASE("fit: equal x values give a constant with its interval", "[backend][fit]") {
  // Mean of 1, 2, 3 is 2; s^2 = (1 + 0 + 1) / 2 = 1; half-width t(0.975, 2) * sqrt(1 / 3).
  const std::vector<double> x = {0, 0, 0}, y = {1, 2, 3};
  const auto f = fit_line(x, y, FitWeighting::absolute);
  CHECK(f.constant);
  CHECK(f.alpha == Approx(2.0));
  CHECK(f.beta == 0);
  CHECK(*f.alpha_ci95 == Approx(4.303 * std::sqrt(1.0 / 3)).epsilon(1e-6));
  CHECK_FALSE(f.beta_ci95.has_value());
  // A single point has no interval.
  const std::vector<double> one = {7};
  CHECK_FALSE(fit_line(one, one).alpha_ci95.has_value());
}

TEST_CASE("fit: Student's t quantiles", "[backend][fit]") {
  CHECK(student_t975(1) == Approx(12.706));
  CHECK(student_t975(30) == Approx(2.042));
  // Tabulated values: t(0.975, 60) = 2.000, t(0.975, 120) = 1.980, limit 1.960.
  CHECK(student_t975(60) == Approx(2.000).epsilon(1e-3));
  CHECK(student_t975(120) == Approx(1.980).epsilon(1e-3));
  CHECK(student_t975(1000000) == Approx(1.960).epsilon(1e-3));
}
