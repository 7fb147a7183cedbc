// Prediction intervals: how far off the model has been on the project's own
// validation data in the matching regime (GPU generation x scale), as P10 / P90
// of the measured-over-predicted ratio, for step time and for memory. A band
// needs at least kMinBand cases; a regime with fewer falls back to the scale
// alone, then to every case of that kind, and says which one it used.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "trainplan/io.hpp"
#include "trainplan/result.hpp"
#include "trainplan/training.hpp"

namespace trainplan {

enum class BandKind { StepTime, Memory };

struct RatioBand {
    double p10 = 1, p90 = 1;  // measured / predicted
    int n = 0;                // cases behind it
    std::string regime;       // e.g. "step time, hopper, multi-node"
};

// Whether a memory peak would exceed the capacity at the band's P90 end: a run
// that fits by the estimate but not there is reported as "fits, but not at the
// P90 end" (fit's text and the GUI's banner). Callers pass the firm peak
// (MemoryBreakdown::firm): what is given back before an out-of-memory (layers
// gathered ahead, the step's own segments, resident paged states) fills only
// spare memory and is no risk at either end.
[[nodiscard]] inline bool over_capacity_at_p90(const RatioBand& b, double total, double capacity) { return total * b.p90 > capacity; }

struct IntervalTable {
    struct Entry {
        BandKind kind = BandKind::StepTime;
        std::string arch, scale, source, id;
        double ratio = 1;     // measured / predicted (step-time sense for throughput metrics)
    };
    std::vector<Entry> entries;
    static constexpr int kMinBand = 8;
    // The band for a scenario; cases from `exclude_source` are left out (leave-one-source-out).
    [[nodiscard]] RatioBand band(BandKind k, const Scenario& s, const std::string& exclude_source = "") const;
};

// The band of a calibrated model from its fit's residuals: exp(+-1.2816 sd) of
// ln(measured / predicted) (normal P10 / P90), when the fit left >= 3 degrees of
// freedom for that kind; nullopt otherwise.
[[nodiscard]] std::optional<RatioBand> calibrated_band(const Calibration& c, BandKind k);

[[nodiscard]] std::string scale_of(const Scenario& s);  // "1 GPU" | "1 node" | "multi-node"

// The residuals of every counted validation case.
[[nodiscard]] Result<IntervalTable> interval_table(const std::vector<TextSource>& case_files, PresetLookup& lookup);

// The residual table as shipped data (validation/residuals.tsv): computing it means
// reading and evaluating every case file (~0.1 s), so `trainplan validate
// --write-residuals` writes it once and `simulate` reads it; a test checks the
// shipped file against the cases and the current model.
//   # comment lines
//   kind <TAB> arch <TAB> scale <TAB> ratio <TAB> id <TAB> source
[[nodiscard]] std::string residuals_to_tsv(const IntervalTable& t);
[[nodiscard]] Result<IntervalTable> parse_residuals_tsv(std::string_view text, const std::string& filename);

struct Coverage {
    int n = 0, inside = 0, below = 0, above = 0;
    [[nodiscard]] double fraction() const { return n ? static_cast<double>(inside) / n : 0; }
};
// Leave-one-source-out: each case against the band built without its source.
[[nodiscard]] Coverage interval_coverage(const IntervalTable& t, BandKind k);

}  // namespace trainplan
