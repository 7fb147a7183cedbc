#include <fmt/format.h>

#include <filesystem>

#include "commands.hpp"
#include "trainplan/app/format.hpp"
#include "trainplan/app/report.hpp"
#include "trainplan/sizing.hpp"
#include "trainplan/units.hpp"

namespace trainplan::cli {

void setup_size(CLI::App& app, SizeOptions& o) {
    add_scenario_flags(app, o.scenario, false);
    auto* g = "Goal";
    app.add_option("--goal", o.goal_file, "Goal TOML: a scenario plus [goal], [rent], [price] tables")->group(g);
    app.add_option("--tokens", o.tokens, "Tokens to train (e.g. 1e12)")->group(g);
    app.add_option("--deadline-days", o.deadline_days, "Deadline in days")->group(g);
    app.add_option("--budget", o.budget, "Budget in USD (rent, or purchase + energy)")->group(g);
    app.add_option("--candidates", o.candidates, "GPU presets to compare (default: every preset with a price)")->delimiter(',')->group(g);
    app.add_option("--rent", o.rent, "Rent per GPU-hour, GPU=USD (repeatable, e.g. h100-sxm=2.5)")->group(g);
    app.add_option("--price", o.price, "Purchase price per GPU, GPU=USD (repeatable; default the preset's)")->group(g);
    app.add_option("--electricity", o.electricity, "Electricity in $ per kWh (default 0.12)")->group(g);
    app.add_option("--pue", o.pue, "Facility PUE (default 1.2)")->group(g);
    app.add_option("--amortize-years", o.amortize, "Amortization period for purchases (default 3)")->group(g);
    app.add_option("--max-gpus", o.max_gpus, "Largest GPU count to consider (default 16384)")->group(g);
    app.add_option("--threads", o.threads, "Worker threads for the layout search (default: all cores)")->group(g);
    app.add_option("-o,--output", o.output, "Write the report here (.md, .html, .json, .csv or .pdf; - for stdout); default Markdown to stdout. Only a regular file is replaced, keeping its permissions");
    app.add_option("--format", o.format, "md | html | json | csv | pdf (default from the output name, else md; pdf prints the HTML with headless Chromium)");
}

namespace {

bool parse_pairs(const std::vector<std::string>& items, const char* flag, std::map<std::string, double>& out, std::vector<Diagnostic>& errs) {
    for (const auto& it : items) {
        const auto eq = it.find('=');
        double v = 0;
        bool ok = eq != std::string::npos && eq > 0;
        if (ok) {
            try {
                size_t used = 0;
                v = std::stod(it.substr(eq + 1), &used);
                ok = used == it.size() - eq - 1 && v >= 0 && v < 1e9;
            } catch (...) {
                ok = false;
            }
        }
        if (!ok) {
            errs.push_back({"", 0, 0, flag, fmt::format("{} = \"{}\" must be GPU=USD with a non-negative amount (e.g. h100-sxm=2.5)", flag, it)});
            continue;
        }
        out[it.substr(0, eq)] = v;
    }
    return errs.empty();
}

}  // namespace

int run_size(const SizeOptions& o, std::ostream& out, std::ostream& err) {
    FilePresets presets = command_presets(o.scenario.preset_dirs, err);
    std::vector<Diagnostic> errs;
    SizingGoal goal;
    ScenarioFlags flags = o.scenario;
    std::vector<std::string> candidates = o.candidates;
    double electricity = 0.12, pue = 1.2, amortize = 3;
    if (!o.goal_file.empty()) {
        std::string text, why;
        if (!read_text_file(o.goal_file, text, why)) {
            err << o.goal_file << ": error: cannot read goal file: " << why << '\n';
            return 2;
        }
        auto gi = parse_goal_toml(text, o.goal_file);
        if (!gi) return report_error(gi.error(), err);
        goal.tokens = gi->tokens;
        goal.deadline_s = gi->deadline_days * 86400;
        goal.budget_usd = gi->budget_usd;
        if (gi->max_gpus > 0) goal.max_gpus = gi->max_gpus;
        goal.rent_usd_per_gpu_hour = gi->rent;
        goal.price_usd_per_gpu = gi->price;
        if (candidates.empty()) candidates = gi->candidates;
        electricity = gi->electricity.value_or(electricity);
        pue = gi->pue.value_or(pue);
        amortize = gi->amortization_years.value_or(amortize);
        flags.scenario_file = o.goal_file;  // the scenario part of the goal file
        flags.extra_sections = {"goal", "rent", "price"};
    }
    if (o.tokens) goal.tokens = *o.tokens;
    if (o.deadline_days) goal.deadline_s = *o.deadline_days * 86400;
    if (o.budget) goal.budget_usd = *o.budget;
    if (o.max_gpus) goal.max_gpus = *o.max_gpus;
    if (o.electricity) electricity = *o.electricity;
    if (o.pue) pue = *o.pue;
    if (o.amortize) amortize = *o.amortize;
    parse_pairs(o.rent, "--rent", goal.rent_usd_per_gpu_hour, errs);
    parse_pairs(o.price, "--price", goal.price_usd_per_gpu, errs);
    if (!(goal.tokens >= 1 && goal.tokens <= 1e18)) errs.push_back({"", 0, 0, "--tokens", fmt::format("--tokens = {:g} must be between 1 and 1e18 (the token budget to train)", goal.tokens)});
    if (goal.deadline_s < 0 || goal.deadline_s > 36500 * 86400.0) errs.push_back({"", 0, 0, "--deadline-days", "--deadline-days must be between 0 and 36500"});
    if (goal.max_gpus < 1 || goal.max_gpus > (1 << 20)) errs.push_back({"", 0, 0, "--max-gpus", fmt::format("--max-gpus = {} must be between 1 and 1048576", goal.max_gpus)});
    if (!(pue >= 1 && pue <= 5)) errs.push_back({"", 0, 0, "--pue", fmt::format("--pue = {:g} must be between 1 and 5", pue)});
    std::string format = o.format;
    if (format.empty()) {
        const std::string ext = std::filesystem::path(o.output).extension().string();
        format = ext == ".html" || ext == ".htm" ? "html" : ext == ".json" ? "json" : ext == ".csv" ? "csv" : ext == ".pdf" ? "pdf" : "md";
    }
    if (format != "md" && format != "html" && format != "json" && format != "csv" && format != "pdf")
        errs.push_back({"", 0, 0, "--format", "--format = \"" + format + "\" is not one of: md, html, json, csv, pdf"});
    if (format == "pdf" && (o.output.empty() || o.output == "-"))
        errs.push_back({"", 0, 0, "--format", "--format pdf needs -o FILE.pdf"});
    if (!errs.empty()) return report_error(Error(errs), err);

    // A preset that fails to parse is bad input, not a candidate fewer.
    std::vector<Diagnostic> invalid;
    if (candidates.empty()) candidates = priced_gpu_candidates(presets, goal, &invalid);
    std::vector<ClusterSpec> clusters;
    for (const auto& id : candidates) {
        auto c = sizing_candidate_cluster(presets, id, &invalid);
        if (!c) return report_error(c.error(), err);
        clusters.push_back(*c);
    }
    if (!invalid.empty()) return report_error(Error(invalid), err);
    // The base scenario: model and training setup (the GPU is chosen per candidate).
    if (!flags.gpu && !candidates.empty()) flags.gpu = candidates.front();
    std::int64_t global_batch = 0;
    auto base = build_scenario(flags, presets, &global_batch);
    if (!base) return report_error(base.error(), err);
    if (global_batch == 0) {
        // No global batch given: ~4M tokens per step, as in Llama 2 / 3 pre-training.
        global_batch = std::max<std::int64_t>(1, (std::int64_t{1} << 22) / base->setup.seq_len);
    }
    base->run.electricity_usd_per_kwh = electricity;
    base->run.pue = pue;
    base->run.amortization_years = amortize;

    const SizingReport rep = size_hardware(*base, global_batch, clusters, goal, o.threads);
    if (format == "pdf") {
        std::string why;
        if (!write_pdf_atomically(o.output, report_html(rep), why)) {
            err << "error: cannot write report: " << why << '\n';
            return 2;
        }
        out << fmt::format("wrote {} (pdf report)\n{}\n", o.output, rep.recommendation);
        return rep.recommended >= 0 ? 0 : 1;
    }
    const std::string text = format == "html" ? report_html(rep) : format == "json" ? report_json(rep) : format == "csv" ? report_csv(rep) : report_markdown(rep);
    if (o.output.empty() || o.output == "-") {
        out << text;
    } else {
        std::string why;
        if (!write_file_atomically(o.output, text, why)) {
            err << "error: cannot write report: " << why << '\n';
            return 2;
        }
        out << fmt::format("wrote {} ({} report)\n{}\n", o.output, format, rep.recommendation);
    }
    return rep.recommended >= 0 ? 0 : 1;
}

}  // namespace trainplan::cli
