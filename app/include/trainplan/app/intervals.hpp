// What the front ends show around a prediction (issue 13): the P10-P90 band
// simulate prints and the GUI draws as error bars, and what a calibration
// profile changes. One place for both, so the CLI and the GUI cannot disagree.
#pragma once

#include <optional>
#include <string>

#include "trainplan/app/presets.hpp"
#include "trainplan/intervals.hpp"

namespace trainplan::app {

// The residual table shipped as validation/residuals.tsv (in the first preset
// root that has one); nullopt when there is none or it does not parse.
std::optional<IntervalTable> residual_table(FilePresets& presets);

// The band of a prediction for `s`: the calibration fit's own residual spread
// when it has the degrees of freedom (calibrated_band), else the validation
// regime's band from `table`; nullopt when neither has cases.
std::optional<RatioBand> prediction_band(const std::optional<IntervalTable>& table, BandKind k, const Scenario& s);

// What a calibration profile changes, e.g. "GEMM x0.900, allocator reserve
// +0.010, framework +0.50 GiB"; empty for the identity.
std::string describe_calibration(const Calibration& c);

}  // namespace trainplan::app
