// A calibration: multipliers on the model's efficiency factors and additions to
// its memory overheads, fitted to a user's own measured runs (calibrate.hpp).
// Plain data carried in Scenario; the identity (the default) changes nothing.
#pragma once

#include <string>

namespace trainplan {

struct Calibration {
    // Multipliers on the efficiency factors (time.cpp), 1 = the preset / policy figure.
    double gemm = 1;         // large-GEMM fraction of dense peak
    double attention = 1;    // fused-attention kernel fraction of peak (forward and backward)
    double hbm = 1;          // HBM bandwidth fraction (memory-bound ops, optimizer step)
    double intra_link = 1;   // achieved bus bandwidth inside a node
    double inter_link = 1;   // achieved bus bandwidth between nodes
    // Additions to the memory overheads (memory.cpp), 0 = the documented default.
    double reserve_fraction = 0;   // added to the caching allocator's reserved-over-allocated fraction
    double framework_bytes = 0;    // added to CUDA context + workspaces + communicators per GPU
    std::string source;            // the profile file it came from (for messages), empty = none
    // Spread of the fit's residuals, sd of ln(measured / predicted) with n - p degrees of
    // freedom, per kind; 0 = not known (prediction intervals then come from validation).
    double time_log_sd = 0, memory_log_sd = 0;
    int time_dof = 0, memory_dof = 0;

    [[nodiscard]] bool identity() const {
        return gemm == 1 && attention == 1 && hbm == 1 && intra_link == 1 && inter_link == 1 && reserve_fraction == 0 &&
               framework_bytes == 0;
    }
};

}  // namespace trainplan
