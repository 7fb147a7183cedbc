#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "trainplan/app/report.hpp"
#include "trainplan/calibrate.hpp"
#include "trainplan/app/intervals.hpp"
#include "trainplan/intervals.hpp"
#include "trainplan/validation.hpp"

namespace fs = std::filesystem;

namespace trainplan::cli {

void setup_validate(CLI::App& app, ValidateOptions& o) {
    app.add_option("--presets", o.preset_dirs, "Extra preset directory; repeatable");
    app.add_option("--cases", o.case_files, "Case files or folders of them (default: the packaged validation/cases/*.toml)");
    app.add_option("--unusable", o.unusable,
                   "List of published figures read and not counted (default: the packaged validation/unusable.toml; "
                   "none with --cases)");
    app.add_flag("--json", o.json, "Machine-readable output");
    app.add_flag("--all", o.all, "Also list the cases left out, with the mechanism or input that is missing");
    app.add_flag("--calibration-cv", o.calibration_cv,
                 "Cross-validate calibration: per source, calibrate on half its cases and predict the other half");
    app.add_option("--write-residuals", o.write_residuals,
                   "Write the residual table behind simulate's P10-P90 bands (shipped as validation/residuals.tsv)");
}

namespace {

// The *.toml files of a folder, sorted.
std::vector<std::string> toml_files_in(const fs::path& dir) {
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().extension() == ".toml") found.push_back(e.path().string());
    std::sort(found.begin(), found.end());
    return found;
}

std::vector<std::string> packaged_case_files(const FilePresets& presets) {
    for (const auto& root : presets.roots()) {
        std::error_code ec;
        const fs::path d = fs::path(root) / "validation" / "cases";
        if (!fs::is_directory(d, ec)) continue;
        auto found = toml_files_in(d);
        if (!found.empty()) return found;
    }
    return {};
}

// The packaged list of figures read and not counted, next to cases/.
std::string packaged_unusable_file(const FilePresets& presets) {
    for (const auto& root : presets.roots()) {
        std::error_code ec;
        const fs::path f = fs::path(root) / "validation" / "unusable.toml";
        if (fs::is_regular_file(f, ec)) return f.string();
    }
    return {};
}

nlohmann::json stats_json(const ValidationStats& s) {
    return {{"count", s.count}, {"median_abs_error", s.median}, {"p90_abs_error", s.p90}, {"worst_abs_error", s.worst}, {"bias", s.bias}};
}

std::string stats_cells(const ValidationStats& s) {
    if (s.count == 0) return fmt::format("{:>4} {:>7} {:>7} {:>7} {:>7}", 0, "-", "-", "-", "-");
    return fmt::format("{:>4} {:>6.1f}% {:>6.1f}% {:>6.1f}% {:>+6.1f}%", s.count, 100 * s.median, 100 * s.p90, 100 * s.worst, 100 * s.bias);
}

void group_table(std::ostream& out, const char* title, const std::vector<ValidationGroup>& groups) {
    out << fmt::format("\n{:<20} | {:<36} | {:<36} | {}\n", title, "memory:     n  median     p90   worst    bias",
                       "time/throughput: n  median  p90  worst  bias", "left out");
    for (const auto& g : groups)
        out << fmt::format("{:<20} | {:<36} | {:<36} | {}\n", g.name, stats_cells(g.memory), stats_cells(g.throughput), g.left_out);
}

}  // namespace

std::optional<IntervalTable> packaged_residuals(FilePresets& presets) { return app::residual_table(presets); }

// --calibration-cv (issue 13): the held-back half's median |error| before and after.
int run_calibration_cv(const std::vector<TextSource>& sources, FilePresets& presets, bool json, std::ostream& out, std::ostream& err) {
    auto cv = calibration_cross_validation(sources, presets);
    if (!cv) return report_error(cv.error(), err);
    if (json) {
        nlohmann::json rows = nlohmann::json::array();
        for (const auto& r : cv->sources)
            rows.push_back({{"source", r.source}, {"train", r.train}, {"test", r.test}, {"fitted", r.fitted},
                            {"median_abs_error_before", r.median_before}, {"median_abs_error_after", r.median_after}});
        out << nlohmann::json{{"sources", rows}, {"held_back", cv->held_back}, {"median_abs_error_before", cv->median_before},
                              {"median_abs_error_after", cv->median_after}, {"p90_abs_error_before", cv->p90_before},
                              {"p90_abs_error_after", cv->p90_after}, {"improved", cv->improved}, {"worsened", cv->worsened}}
                   .dump(2)
            << '\n';
        return 0;
    }
    out << fmt::format("{:<60} {:>5} {:>5} {:>9} {:>9}  {}\n", "source (calibrated on alternate cases of each kind)", "train", "test",
                       "before", "after", "fitted");
    for (const auto& r : cv->sources) {
        std::string fitted;
        for (const auto& k : r.fitted) fitted += (fitted.empty() ? "" : ", ") + k;
        const std::string src = r.source.size() > 60 ? r.source.substr(0, 57) + "..." : r.source;
        out << fmt::format("{:<60} {:>5} {:>5} {:>8.1f}% {:>8.1f}%  {}\n", src, r.train, r.test, 100 * r.median_before, 100 * r.median_after,
                           fitted.empty() ? "-" : fitted);
    }
    out << fmt::format("\n{} sources, {} held-back cases: median |error| {:.1f} % before, {:.1f} % after calibration; "
                       "90th percentile {:.1f} % -> {:.1f} %; {} improved, {} worsened\n",
                       cv->sources.size(), cv->held_back, 100 * cv->median_before, 100 * cv->median_after, 100 * cv->p90_before,
                       100 * cv->p90_after, cv->improved, cv->worsened);
    // The P10-P90 bands simulate prints, checked leave-one-source-out.
    if (auto t = interval_table(sources, presets)) {
        for (BandKind k : {BandKind::StepTime, BandKind::Memory}) {
            const Coverage c = interval_coverage(*t, k);
            out << fmt::format("P10-P90 band coverage ({}, leave-one-source-out): {}/{} = {:.1f} % inside ({} below, {} above)\n",
                               k == BandKind::StepTime ? "step time" : "memory", c.inside, c.n, 100 * c.fraction(), c.below, c.above);
        }
    }
    return 0;
}

int run_validate(const ValidateOptions& o, std::ostream& out, std::ostream& err) {
    FilePresets presets = command_presets(o.preset_dirs, err);
    std::vector<std::string> files;
    if (o.case_files.empty()) {
        files = packaged_case_files(presets);
    } else {
        for (const auto& f : o.case_files) {
            std::error_code ec;
            if (fs::is_directory(f, ec)) {
                auto in = toml_files_in(f);
                files.insert(files.end(), in.begin(), in.end());
            } else {
                files.push_back(f);
            }
        }
    }
    if (files.empty()) {
        err << "error: no validation case files found (looked for validation/cases/*.toml in the preset directories)\n";
        return 2;
    }
    std::vector<TextSource> sources;
    for (const auto& f : files) {
        std::string why;
        auto src = presets.read_file(f, why);
        if (!src) {
            err << f << ": error: cannot read case file: " << why << '\n';
            return 2;
        }
        sources.push_back(std::move(*src));
    }
    if (o.calibration_cv) return run_calibration_cv(sources, presets, o.json, out, err);
    if (!o.write_residuals.empty()) {
        auto t = interval_table(sources, presets);
        if (!t) return report_error(t.error(), err);
        std::string why;
        if (!write_file_atomically(o.write_residuals, residuals_to_tsv(*t), why)) {
            err << "error: " << why << '\n';
            return 2;
        }
        out << "wrote " << t->entries.size() << " residuals to " << o.write_residuals << '\n';
        return 0;
    }
    auto rep = run_validation(sources, presets);
    if (!rep) return report_error(rep.error(), err);
    // Figures read and not counted: the source lacks the exact configuration
    // (validation/unusable.toml); reported on a line of their own.
    std::vector<UnusableCase> unusable;
    const std::string unusable_file = !o.unusable.empty() ? o.unusable : o.case_files.empty() ? packaged_unusable_file(presets) : "";
    if (!unusable_file.empty()) {
        std::string why;
        auto src = presets.read_file(unusable_file, why);
        if (!src) {
            err << unusable_file << ": error: cannot read the list of unusable figures: " << why << '\n';
            return 2;
        }
        auto u = load_unusable_cases(*src);
        if (!u) return report_error(u.error(), err);
        unusable = std::move(*u);
    }
    std::map<std::string, int> lacks;
    for (const auto& u : unusable) ++lacks[u.lacks];

    // Left-out cases grouped by what is missing.
    std::map<std::string, int> mechanisms, inputs;
    int not_valid = 0;
    for (const auto& r : rep->rows) {
        if (!r.missing_mechanism.empty()) ++mechanisms[r.missing_mechanism];
        else if (!r.missing_input.empty()) ++inputs[r.missing_input];
        else if (!r.counted && !r.verdict) ++not_valid;
    }
    int n_mech = 0, n_input = 0;
    for (const auto& [k, n] : mechanisms) n_mech += n;
    for (const auto& [k, n] : inputs) n_input += n;

    if (o.json) {
        nlohmann::json rows = nlohmann::json::array();
        for (const auto& r : rep->rows)
            rows.push_back({{"id", r.id},           {"kind", r.kind},           {"metric", r.metric},
                            {"unit", r.unit},       {"published", r.published}, {"predicted", r.predicted},
                            {"error", r.error},     {"counted", r.counted},     {"verdict", r.verdict},
                            {"verdict_ok", r.verdict_ok}, {"ran_fits", r.ran ? nlohmann::json(r.ran_fits) : nlohmann::json(nullptr)}, {"note", r.note},     {"source", r.source},
                            {"stack", r.stack},     {"regimes", r.regimes},     {"collection", r.collection},
                            {"missing_mechanism", r.missing_mechanism}, {"missing_input", r.missing_input}});
        auto groups = [](const std::vector<ValidationGroup>& gs) {
            nlohmann::json a = nlohmann::json::array();
            for (const auto& g : gs)
                a.push_back({{"name", g.name}, {"memory", stats_json(g.memory)}, {"throughput", stats_json(g.throughput)}, {"left_out", g.left_out}});
            return a;
        };
        nlohmann::json left = {{"missing_mechanism", mechanisms}, {"missing_input", inputs}, {"count", n_mech + n_input + not_valid}};
        out << nlohmann::json{{"cases", rows},
                              {"memory", stats_json(rep->memory)},
                              {"throughput", stats_json(rep->throughput)},
                              {"grown", {{"memory", stats_json(rep->grown_memory)}, {"throughput", stats_json(rep->grown_throughput)}}},
                              {"all_counted", {{"memory", stats_json(rep->all_memory)}, {"throughput", stats_json(rep->all_throughput)}}},
                              {"by_stack", groups(rep->by_stack)},
                              {"by_regime", groups(rep->by_regime)},
                              {"left_out", left},
                              {"read_not_counted", {{"count", unusable.size()}, {"lacks", lacks}}},
                              {"within_bounds", rep->within_bounds()}}
                   .dump(2)
            << '\n';
        return rep->within_bounds() ? 0 : 1;
    }

    for (const char* kind : {"memory", "throughput"}) {
        out << fmt::format("\n{:<48} {:<40} {:>11} {:>11} {:>8}\n", std::string(kind) + " cases", "compared", "published", "predicted", "error");
        for (const auto& r : rep->rows) {
            if (r.kind != kind) continue;
            const std::string tag = r.collection == "grown" ? " [grown]" : "";
            if (r.counted) {
                out << fmt::format("{:<48} {:<40} {:>9.2f} {:<1} {:>9.2f} {:<1} {:>+7.1f}%{}{}\n", r.id, r.metric.substr(0, 40), r.published,
                                   r.unit.substr(0, 1), r.predicted, r.unit.substr(0, 1), 100 * r.error, tag,
                                   r.note.empty() ? "" : "  (" + r.note + ")");
            } else if (r.verdict) {
                out << fmt::format("{:<48} {:<40} {:>11} {:>9.2f} G {:>8}{}\n", r.id, r.metric == "fits" ? "fits under the published bound" : "reported out of memory",
                                   r.metric == "fits" ? fmt::format("< {:.0f} GB", r.published) : "OOM", r.predicted, r.verdict_ok ? "ok" : "MISS", tag);
            } else if (o.all) {
                out << fmt::format("{:<48} left out: {}\n", r.id, r.note);
            }
        }
    }
    auto line = [&](const char* kind, const ValidationStats& s, const char* budget) {
        out << fmt::format("{:<10} {:>3} cases: median |error| {:5.1f} %, 90th percentile {:5.1f} %, worst {:5.1f} %, bias {:+5.1f} %{}\n", kind,
                           s.count, 100 * s.median, 100 * s.p90, 100 * s.worst, 100 * s.bias, budget);
    };
    group_table(out, "by stack", rep->by_stack);
    group_table(out, "by regime", rep->by_regime);
    out << "\nleft out for a missing mechanism (" << n_mech << "):\n";
    for (const auto& [k, n] : mechanisms) out << fmt::format("  {:>3}  {}\n", n, k);
    out << "left out for input the source does not give (" << n_input << "):\n";
    for (const auto& [k, n] : inputs) out << fmt::format("  {:>3}  {}\n", n, k);
    if (not_valid) out << fmt::format("not a valid scenario: {} (see --all)\n", not_valid);
    if (!unusable.empty()) {
        out << fmt::format("read and not counted: {} (the source lacks the exact configuration; {})\n", unusable.size(), unusable_file);
        for (const auto& [k, n] : lacks) out << fmt::format("  {:>3}  {}\n", n, k);
        if (o.all)
            for (const auto& u : unusable) out << fmt::format("  {:<46} {} ({})\n", u.id, u.lacks, u.source_locator);
    }
    out << "\nreference collection (the budgets apply):\n";
    line("memory", rep->memory, "   [median <= 5 %, worst <= 15 %]");
    line("throughput", rep->throughput, "   [median <= 10 %, 90th percentile <= 20 %]");
    out << "grown collection (issue 11; reported, not yet budgeted):\n";
    line("memory", rep->grown_memory, "");
    line("throughput", rep->grown_throughput, "");
    out << "every counted case (issue 11's targets, not yet met where marked):\n";
    auto target = [](const ValidationStats& s, double med, double p90) {
        const bool met = s.median <= med && s.p90 <= p90;
        return fmt::format("   [median <= {:.0f} %, 90th percentile <= {:.0f} %: {}]", 100 * med, 100 * p90, met ? "met" : "NOT MET");
    };
    line("memory", rep->all_memory, target(rep->all_memory, 0.04, 0.10).c_str());
    line("throughput", rep->all_throughput, target(rep->all_throughput, 0.07, 0.15).c_str());
    const int n_left = n_mech + n_input + not_valid;
    const double left_share = rep->rows.empty() ? 0.0 : static_cast<double>(n_left) / static_cast<double>(rep->rows.size());
    out << fmt::format("{} fits/OOM verdicts, {} wrong; {} of {} cases left out ({:.1f} %; issue 11's target < 5 %: {}){}\n", rep->verdicts,
                       rep->verdicts_failed, n_left, rep->rows.size(), 100.0 * left_share, left_share < 0.05 ? "met" : "NOT MET",
                       o.all ? "" : " (--all lists them with the reason)");
    out << fmt::format("{} published runs timed whole (they ran, so they fit): {} predicted not to fit{}\n", rep->ran, rep->ran_not_fitting,
                       rep->ran_not_fitting ? ":" : "");
    for (const auto& r : rep->rows)
        if (r.counted && r.ran && !r.ran_fits)
            out << fmt::format("    {:<48} {:7.1f} GB of {:.1f} GB\n", r.id, r.ran_peak_gb, r.ran_capacity_gb);
    out << (rep->within_bounds() ? "WITHIN BOUNDS\n" : "OUTSIDE BOUNDS\n");
    return rep->within_bounds() ? 0 : 1;
}

}  // namespace trainplan::cli
