// Shared by the fuzz targets: evaluate a parsed scenario and trap on anything
// that is not a finite, non-negative number.
#pragma once

#include <cmath>

#include "trainplan/app/presets.hpp"
#include "trainplan/fit.hpp"
#include "trainplan/time.hpp"

namespace fuzz {

inline void require(bool ok) {
    if (!ok) __builtin_trap();
}

inline void check_finite(double v) { require(std::isfinite(v) && v >= 0); }

inline void evaluate(const trainplan::Scenario& s) {
    using namespace trainplan;
    if (!validate(s).empty()) return;
    const MemoryEstimate me = estimate_memory(s, true);
    for (const auto& st : me.stages) {
        const MemoryBreakdown& m = st.mem;
        for (double v : {m.weights, m.gradients, m.optimizer, m.activations, m.logits, m.temporary, m.total, m.cpu}) check_finite(v);
    }
    const TimeEstimate te = estimate_time(s);
    for (double v : {te.time.step_s, te.time.compute_s, te.time.communication_s, te.time.bubble_s, te.throughput.tokens_per_s, te.throughput.mfu})
        check_finite(v);
    require(te.time.step_s > 0);
}

inline trainplan::app::FilePresets& presets() {
    static trainplan::app::FilePresets p({TRAINPLAN_SOURCE_DIR});
    return p;
}

}  // namespace fuzz
