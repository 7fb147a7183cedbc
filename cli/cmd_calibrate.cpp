// trainplan calibrate RUNS... [-o profile.toml]: fit the model's efficiency
// factors to measured runs (run files, or logs with the scenario given by
// --scenario / flags), print the fitted parameters with standard errors, the
// parameters held and why, the residuals before and after, and write a profile.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "trainplan/app/report.hpp"
#include "trainplan/calibrate.hpp"

namespace fs = std::filesystem;

namespace trainplan::cli {

void setup_calibrate(CLI::App& app, CalibrateCommandOptions& o) {
    app.add_option("runs", o.runs,
                   "Run files (TOML: a scenario + [measured]) and/or logs (Megatron-LM/NeMo, Hugging Face trainer_state.json, "
                   "torchtitan, torchtune, torch.cuda.memory_summary()); logs are one run with the scenario of --scenario / flags");
    add_scenario_flags(app, o.scenario, false);
    // RUNS take the positionals; the model comes from --scenario or --model.
    app.remove_option(app.get_option("model"));
    app.add_option("--model", o.scenario.model, "Model for the logs' scenario (preset, shorthand, TOML or config.json)");
    app.add_option("--log", o.logs, "A log of the run described by --scenario / flags; repeatable (merged into one run)");
    app.add_option("--log-format", o.log_format, "auto | megatron | nemo | hf-trainer | torchtitan | torchtune | memory-summary")
        ->check(CLI::IsMember({"auto", "megatron", "nemo", "hf-trainer", "torchtitan", "torchtune", "memory-summary"}));
    app.add_option("-o,--output", o.output, "Write the calibration profile TOML here (atomically)");
    app.add_flag("--json", o.json, "Machine-readable output");
}

namespace {

bool is_toml(const std::string& path) { return fs::path(path).extension() == ".toml"; }

std::string pct(double e) { return fmt::format("{:+.1f}%", 100 * e); }

std::string fmt_value(const FittedParam& p) {
    if (p.key == "framework_gib") return fmt::format("{:.3f} GiB", p.value);
    return fmt::format("{:.4f}", p.value);
}

std::string fmt_measured(const Residual& r, double v) {
    if (r.metric.find("GB") != std::string::npos) return fmt::format("{:.2f}", v / 1e9);
    return fmt::format("{:.4g}", v);
}

}  // namespace

int run_calibrate(const CalibrateCommandOptions& o, std::ostream& out, std::ostream& err) {
    const auto t0 = std::chrono::steady_clock::now();
    FilePresets presets(o.scenario.preset_dirs);
    std::vector<MeasuredRun> runs;
    std::vector<Diagnostic> errs;
    std::vector<std::string> logs = o.logs;
    const LogFormat fmt_given = parse_log_format(o.log_format).value_or(LogFormat::Auto);
    auto read = [&](const std::string& path, const std::string& key, std::string& text) {
        std::string why;
        if (read_text_file(path, text, why)) return true;
        errs.push_back({path, 0, 0, key, "cannot read: " + why});
        return false;
    };
    for (const std::string& path : o.runs) {
        if (!is_toml(path)) { logs.push_back(path); continue; }
        std::string text;
        if (!read(path, "RUNS", text)) continue;
        auto rf = parse_run_file(text, path);
        if (!rf) { for (const auto& d : rf.error().diagnostics) errs.push_back(d); continue; }
        auto sc = resolve_scenario(rf->scenario, presets);
        if (!sc) { for (const auto& d : sc.error().diagnostics) errs.push_back(d); continue; }
        MeasuredRun run{rf->name.empty() ? fs::path(path).stem().string() : rf->name, *sc, {}};
        if (!rf->log.empty()) {
            // The named log, relative to the run file; the file's own figures win.
            const std::string log_path = (fs::path(path).parent_path() / rf->log).string();
            std::string log_text, why;
            if (!read_text_file(log_path, log_text, why)) {
                errs.push_back({path, rf->log_line, 1, "log", "log = \"" + rf->log + "\": cannot read " + log_path + ": " + why});
                continue;
            }
            auto m = parse_run_log(log_text, log_path, parse_log_format(rf->log_format).value_or(LogFormat::Auto));
            if (!m) { for (const auto& d : m.error().diagnostics) errs.push_back(d); continue; }
            run.measured = *m;
        }
        run.measured.merge(rf->measured);
        runs.push_back(std::move(run));
    }
    if (!logs.empty()) {
        MeasuredRun run;
        run.name = fs::path(logs.front()).filename().string();
        for (const std::string& path : logs) {
            std::string text;
            if (!read(path, "--log", text)) continue;
            auto m = parse_run_log(text, path, fmt_given);
            if (!m) { for (const auto& d : m.error().diagnostics) errs.push_back(d); continue; }
            run.measured.merge(*m);
        }
        if (o.scenario.scenario_file.empty() && o.scenario.model.empty())
            errs.push_back({logs.front(), 0, 0, "--scenario", "a log needs the run's scenario: give --scenario FILE (or --model and the layout flags)"});
        else if (errs.empty()) {
            auto sc = build_scenario(o.scenario, presets);
            if (!sc) for (const auto& d : sc.error().diagnostics) errs.push_back(d);
            else { run.scenario = *sc; runs.push_back(std::move(run)); }
        }
    }
    if (!errs.empty()) return report_error(Error(errs), err);
    if (runs.empty()) return report_error(Error(Diagnostic{"", 0, 0, "RUNS", "no runs given: pass run files (TOML) or logs with --scenario"}), err);

    trainplan::CalibrateOptions opt;
    if (!o.scenario.calibration_file.empty()) {
        std::string text;
        if (!read(o.scenario.calibration_file, "--calibration", text)) return report_error(Error(errs), err);
        auto c = parse_calibration_toml(text, o.scenario.calibration_file);
        if (!c) return report_error(c.error(), err);
        opt.start = *c;
    }
    auto fit = calibrate(runs, opt);
    if (!fit) return report_error(fit.error(), err);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!o.output.empty()) {
        std::string why;
        if (!write_file_atomically(o.output, calibration_to_toml(*fit, static_cast<int>(runs.size())), why))
            return report_error(Error(Diagnostic{o.output, 0, 0, "--output", "cannot write calibration profile: " + why}), err);
    }
    if (o.json) {
        nlohmann::json j;
        j["runs"] = runs.size();
        j["rank"] = fit->rank;
        j["iterations"] = fit->iterations;
        j["rms_log_error_before"] = fit->rms_log_before;
        j["rms_log_error_after"] = fit->rms_log_after;
        j["singular_values"] = fit->singular_values;
        j["elapsed_s"] = elapsed;
        for (const FittedParam& p : fit->params) {
            nlohmann::json jp = {{"value", p.value}, {"start", p.start}, {"fitted", p.fitted}, {"at_bound", p.at_bound}};
            if (p.fitted && std::isfinite(p.stderr_)) jp["stderr"] = p.stderr_;
            else jp["stderr"] = nullptr;
            if (!p.fitted) jp["held_reason"] = p.held_reason;
            j["parameters"][p.key] = jp;
        }
        for (const Residual& r : fit->residuals)
            j["residuals"].push_back({{"run", r.run}, {"metric", r.metric}, {"measured", r.measured}, {"predicted_before", r.before},
                                      {"predicted_after", r.after}, {"error_before", r.error_before()}, {"error_after", r.error_after()}});
        if (!o.output.empty()) j["profile"] = o.output;
        out << j.dump(2) << '\n';
        return 0;
    }
    out << fmt::format("Calibrated on {} run(s), {} measured figure(s): {} parameter(s) fitted, {} iteration(s), {:.0f} ms\n\n",
                       runs.size(), fit->residuals.size(), fit->rank, fit->iterations, elapsed * 1e3);
    out << fmt::format("{:<18} {:>12} {:>12}  {}\n", "parameter", "value", "std. error", "");
    for (const FittedParam& p : fit->params) {
        if (p.fitted)
            out << fmt::format("{:<18} {:>12} {:>12}  fitted{}\n", p.key, fmt_value(p),
                               std::isfinite(p.stderr_) ? fmt::format("{:.4f}", p.stderr_) : std::string("n/a"),
                               p.at_bound ? " (at its bound: the runs ask for more than the range allows)" : "");
        else
            out << fmt::format("{:<18} {:>12} {:>12}  held: {}\n", p.key, fmt_value(p), "-", p.held_reason);
    }
    if (std::any_of(fit->params.begin(), fit->params.end(), [](const FittedParam& p) { return p.fitted && !std::isfinite(p.stderr_); }))
        out << "(standard errors need more measured figures than fitted parameters)\n";
    out << fmt::format("\n{:<24} {:<22} {:>10} {:>10} {:>8} {:>10} {:>8}\n", "run", "figure", "measured", "before", "error", "after", "error");
    for (const Residual& r : fit->residuals)
        out << fmt::format("{:<24} {:<22} {:>10} {:>10} {:>8} {:>10} {:>8}\n", r.run, r.metric, fmt_measured(r, r.measured),
                           fmt_measured(r, r.before), pct(r.error_before()), fmt_measured(r, r.after), pct(r.error_after()));
    out << fmt::format("\nrms |ln(predicted / measured)|: {:.4f} before, {:.4f} after\n", fit->rms_log_before, fit->rms_log_after);
    if (!o.output.empty()) out << fmt::format("Profile written to {} (apply with --calibration {})\n", o.output, o.output);
    return 0;
}

}  // namespace trainplan::cli
