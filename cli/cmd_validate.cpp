#include <fmt/format.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "trainplan/validation.hpp"

namespace fs = std::filesystem;

namespace trainplan::cli {

void setup_validate(CLI::App& app, ValidateOptions& o) {
    app.add_option("--presets", o.preset_dirs, "Extra preset directory; repeatable");
    app.add_option("--cases", o.case_files, "Case files (default: the packaged published-*.toml)");
    app.add_flag("--json", o.json, "Machine-readable output");
    app.add_flag("--all", o.all, "Also list the cases left out, with the reason");
}

std::vector<std::string> packaged_case_files(const FilePresets& presets) {
    for (const auto& root : presets.roots()) {
        std::vector<std::string> found;
        for (const char* dir : {"validation", "tests/data"}) {
            std::error_code ec;
            const fs::path d = fs::path(root) / dir;
            if (!fs::is_directory(d, ec)) continue;
            for (const auto& e : fs::directory_iterator(d, ec)) {
                const std::string name = e.path().filename().string();
                if (name.rfind("published-", 0) == 0 && e.path().extension() == ".toml") found.push_back(e.path().string());
            }
        }
        if (!found.empty()) {
            std::sort(found.begin(), found.end());
            return found;
        }
    }
    return {};
}

int run_validate(const ValidateOptions& o, std::ostream& out, std::ostream& err) {
    FilePresets presets = command_presets(o.preset_dirs, err);
    std::vector<std::string> files = o.case_files.empty() ? packaged_case_files(presets) : o.case_files;
    if (files.empty()) {
        err << "error: no validation case files found (looked for validation/published-*.toml in the preset directories)\n";
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
    auto rep = run_validation(sources, presets);
    if (!rep) return report_error(rep.error(), err);

    if (o.json) {
        nlohmann::json rows = nlohmann::json::array();
        for (const auto& r : rep->rows)
            rows.push_back({{"id", r.id}, {"kind", r.kind}, {"metric", r.metric}, {"unit", r.unit}, {"published", r.published},
                            {"predicted", r.predicted}, {"error", r.error}, {"counted", r.counted}, {"verdict", r.verdict},
                            {"verdict_ok", r.verdict_ok}, {"note", r.note}, {"source", r.source}});
        auto st = [](const ValidationStats& s) {
            return nlohmann::json{{"count", s.count}, {"median_abs_error", s.median}, {"p90_abs_error", s.p90}, {"worst_abs_error", s.worst}};
        };
        out << nlohmann::json{{"cases", rows}, {"memory", st(rep->memory)}, {"throughput", st(rep->throughput)},
                              {"within_bounds", rep->within_bounds()}}
                   .dump(2)
            << '\n';
        return rep->within_bounds() ? 0 : 1;
    }

    for (const char* kind : {"memory", "throughput"}) {
        out << fmt::format("\n{:<48} {:<40} {:>11} {:>11} {:>8}\n", std::string(kind) + " cases", "compared", "published", "predicted", "error");
        for (const auto& r : rep->rows) {
            if (r.kind != kind) continue;
            if (r.counted) {
                out << fmt::format("{:<48} {:<40} {:>9.2f} {:<1} {:>9.2f} {:<1} {:>+7.1f}%{}\n", r.id, r.metric.substr(0, 40), r.published,
                                   r.unit.substr(0, 1), r.predicted, r.unit.substr(0, 1), 100 * r.error,
                                   r.note.empty() ? "" : "  (" + r.note + ")");
            } else if (r.verdict) {
                out << fmt::format("{:<48} {:<40} {:>11} {:>9.2f} G {:>8}\n", r.id, r.metric == "fits" ? "fits under the published bound" : "reported out of memory",
                                   r.metric == "fits" ? fmt::format("< {:.0f} GB", r.published) : "OOM", r.predicted, r.verdict_ok ? "ok" : "MISS");
            } else if (o.all) {
                out << fmt::format("{:<48} left out: {}\n", r.id, r.note);
            }
        }
    }
    auto line = [&](const char* kind, const ValidationStats& s, const char* budget) {
        out << fmt::format("{:<10} {:>3} cases: median |error| {:5.1f} %, 90th percentile {:5.1f} %, worst {:5.1f} %   [{}]\n", kind,
                           s.count, 100 * s.median, 100 * s.p90, 100 * s.worst, budget);
    };
    out << '\n';
    line("memory", rep->memory, "median <= 5 %, worst <= 15 %");
    line("throughput", rep->throughput, "median <= 10 %, 90th percentile <= 20 %");
    int left = 0;
    for (const auto& r : rep->rows) left += (!r.counted && !r.verdict) ? 1 : 0;
    out << fmt::format("{} fits/OOM verdicts, {} wrong; {} cases left out{}\n", rep->verdicts, rep->verdicts_failed, left,
                       o.all ? "" : " (--all lists them with the reason)");
    out << (rep->within_bounds() ? "WITHIN BOUNDS\n" : "OUTSIDE BOUNDS\n");
    return rep->within_bounds() ? 0 : 1;
}

}  // namespace trainplan::cli
