// The accuracy table: published measurements (with their sources) against the
// model's predictions, compared like with like (each source's FLOP convention,
// allocated vs device memory). Used by `trainplan validate` and the tests.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "trainplan/io.hpp"

namespace trainplan {

struct ValidationRow {
    std::string id;
    std::string kind;        // memory | throughput (throughput, MFU and step-time cases)
    std::string metric;      // what is compared, in the source's convention
    std::string unit;
    double published = 0;
    double predicted = 0;
    double error = 0;        // (predicted - published) / published
    bool counted = false;    // enters the statistics
    bool verdict = false;    // a fits / does-not-fit check instead of a number
    bool verdict_ok = false;
    std::string note;        // why left out, or the assumptions made
    std::string source;
};

struct ValidationStats {
    int count = 0;
    double median = 0, p90 = 0, worst = 0;  // of |error|
};

struct ValidationReport {
    std::vector<ValidationRow> rows;
    ValidationStats memory, throughput;
    int verdicts = 0, verdicts_failed = 0;
    // Budgets (design.md): memory median <= 5 %, worst <= 15 %; throughput
    // median <= 10 %, 90th percentile <= 20 %.
    [[nodiscard]] bool within_bounds() const;
};

// The scenario of each throughput case the tool can express (for layout-search
// checks against published runs).
struct PublishedRun {
    std::string id;
    Scenario scenario;
};
[[nodiscard]] Result<std::vector<PublishedRun>> published_runs(const std::vector<TextSource>& case_files, PresetLookup& lookup);

// Evaluates every case of a published-cases TOML document (the format of
// tests/data/published-*.toml). GPUs and models are looked up through `lookup`.
[[nodiscard]] Result<ValidationReport> run_validation(const std::vector<TextSource>& case_files, PresetLookup& lookup);

}  // namespace trainplan
