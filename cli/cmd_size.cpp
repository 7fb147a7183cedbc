#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "commands.hpp"
#include "trainplan/app/format.hpp"
#include "trainplan/app/candidates.hpp"
#include "trainplan/app/report.hpp"
#include "trainplan/sizing.hpp"
#include "trainplan/units.hpp"

namespace trainplan::cli {

void setup_size(CLI::App& app, SizeOptions& o) {
    add_scenario_flags(app, o.scenario, false);
    auto* g = "Goal";
    app.add_option("--goal", o.goal_file, "Goal TOML: a scenario plus [goal], [rent], [price] tables")->group(g);
    add_option_field(app, "tokens", o.tokens, g);
    add_option_field(app, "deadline_days", o.deadline_days, g);
    add_option_field(app, "budget_usd", o.budget, g);
    app.add_option("--candidates", o.candidates, "GPU presets to compare (default: every preset with a price)")->delimiter(',')->group(g);
    app.add_option(option_field("rent").flag, o.rent, option_field("rent").help)->group(g);
    app.add_option(option_field("price").flag, o.price, option_field("price").help)->group(g);
    add_option_field(app, "electricity_usd_per_kwh", o.electricity, g);
    add_option_field(app, "pue", o.pue, g);
    add_option_field(app, "amortization_years", o.amortize, g);
    add_option_field(app, "max_gpus", o.max_gpus, g)->description("Largest GPU count to consider (default 16384)");
    add_option_field(app, "confidence", o.confidence, g);
    app.add_option("--cost-basis", o.cost_basis,
                   "How renting and buying are compared: outlay (default: rent for the run vs purchase + energy) or amortized "
                   "(rent vs the purchase share for the run's duration + energy)")->group(g);
    app.add_option("--threads", o.threads, "Worker threads for the layout search (default: all cores)")->group(g);
    app.add_option("-o,--output", o.output, "Write the report here (.md, .html, .json, .csv or .pdf; - for stdout); default Markdown to stdout. Only a regular file is replaced, keeping its permissions");
    app.add_option("--format", o.format, "md | html | json | csv | pdf (default from the output name, else md; pdf prints the HTML with headless Chromium)");
}

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
        if (gi->confidence) goal.confidence = *gi->confidence;
        if (gi->cost_basis == "amortized") goal.cost_basis = CostBasis::Amortized;
        flags.scenario_file = o.goal_file;  // the scenario part of the goal file
        flags.extra_sections = {"goal", "rent", "price"};
    }
    // Each flag by the same rule as its goal-file key (schema.cpp option_fields).
    if (auto v = checked_option("tokens", o.tokens, errs)) goal.tokens = *v;
    if (auto v = checked_option("deadline_days", o.deadline_days, errs)) goal.deadline_s = *v * 86400;
    if (auto v = checked_option("budget_usd", o.budget, errs)) goal.budget_usd = *v;
    if (auto v = checked_option("max_gpus", o.max_gpus, errs)) goal.max_gpus = static_cast<int>(*v);
    if (auto v = checked_option("electricity_usd_per_kwh", o.electricity, errs)) electricity = *v;
    if (auto v = checked_option("pue", o.pue, errs)) pue = *v;
    if (auto v = checked_option("amortization_years", o.amortize, errs)) amortize = *v;
    if (auto v = checked_option("confidence", o.confidence, errs)) goal.confidence = *v;
    if (o.cost_basis == "amortized") goal.cost_basis = CostBasis::Amortized;
    else if (o.cost_basis == "outlay") goal.cost_basis = CostBasis::Outlay;
    else if (!o.cost_basis.empty())
        errs.push_back({"", 0, 0, "--cost-basis", "--cost-basis = \"" + o.cost_basis + "\" is not one of: outlay, amortized"});
    if (!o.goal_file.empty()) {
        check_priced_ids(goal.rent_usd_per_gpu_hour, o.goal_file, "rent", presets, errs);
        check_priced_ids(goal.price_usd_per_gpu, o.goal_file, "price", presets, errs);
    }
    // A bare amount (as simulate and plan take it) prices the one candidate; with
    // several candidates it is ambiguous, so GPU=USD is asked for.
    auto bare = [&](const std::vector<std::string>& items, const char* key) {
        std::vector<std::string> out;
        for (const auto& it : items) {
            char* end = nullptr;
            const bool number = !it.empty() && (std::strtod(it.c_str(), &end), end && *end == '\0');
            if (it.find('=') != std::string::npos || !number) out.push_back(it);  // parse_priced names what is wrong
            else if (candidates.size() == 1) out.push_back(candidates.front() + "=" + it);
            else
                errs.push_back({"", 0, 0, option_field(key).flag,
                                fmt::format("{} = \"{}\": a bare amount needs exactly one candidate (--candidates GPU); with {}, write GPU=USD "
                                            "(e.g. h100-sxm={})",
                                            option_field(key).flag, it, candidates.empty() ? "every priced preset" : "several", it)});
        }
        return out;
    };
    parse_priced(bare(o.rent, "rent"), "rent", presets, goal.rent_usd_per_gpu_hour, errs);
    parse_priced(bare(o.price, "price"), "price", presets, goal.price_usd_per_gpu, errs);
    if (goal.tokens <= 0) errs.push_back({"", 0, 0, "--tokens", "size needs --tokens (the token budget to train) or a goal file"});
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
    std::vector<SizingCandidate> clusters;
    for (const auto& id : candidates) {
        auto c = sizing_candidate(presets, id, &invalid);
        if (!c) return report_error(c.error(), err);
        clusters.push_back(*c);
    }
    if (!invalid.empty()) return report_error(Error(invalid), err);
    // The base scenario: model and training setup (the GPU is chosen per candidate).
    if (!flags.has("gpu") && !candidates.empty()) flags.values["gpu"] = candidates.front();
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

    const std::optional<IntervalTable> bands = packaged_residuals(presets);
    const SizingReport rep = size_hardware(*base, global_batch, clusters, goal, o.threads, bands && !bands->entries.empty() ? &*bands : nullptr);
    // No deadline: the frontier is the answer (exit 0); with one, 1 when nothing meets it.
    const int code = rep.recommended >= 0 || goal.deadline_s <= 0 ? 0 : 1;
    if (format == "pdf") {
        std::string why;
        if (!write_pdf_atomically(o.output, report_html(rep), why)) {
            err << "error: cannot write report: " << why << '\n';
            return 2;
        }
        out << fmt::format("wrote {} (pdf report)\n{}\n", o.output, rep.recommendation);
        return code;
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
    return code;
}

}  // namespace trainplan::cli
