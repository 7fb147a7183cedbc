#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "trainplan/app/intervals.hpp"
#include "trainplan/app/format.hpp"
#include "trainplan/advisor.hpp"
#include "trainplan/intervals.hpp"
#include "trainplan/units.hpp"

namespace trainplan::cli {

void setup_advise(CLI::App& app, AdviseOptions& o) {
    setup_simulate(app, o.sim);
    app.remove_option(app.get_option("--csv"));
    auto* g = "What you observe (optional)";
    add_option_field(app, "observed_step_s", o.step_s, g);
    add_option_field(app, "observed_tokens_per_s", o.tokens_per_s, g);
    add_option_field(app, "gpu_util", o.util, g);
    app.add_flag("--util-swings", o.swings, "Utilization swings between ~0 and 100 %")->group(g);
    add_option_field(app, "observed_peak_memory_gb", o.peak_gb, g);
    app.add_flag("--oom", o.oom, "The run stops with CUDA out of memory")->group(g);
    add_option_field(app, "gpu_temp", o.temp, g);
    add_option_field(app, "gpu_clock_mhz", o.clock, g);
    app.add_option("--storage", o.storage, "Where the data is read from: hdd | sata-ssd | nvme | network")->group(g);
    app.add_option("--remedies", o.max_remedies, "How many remedies to list (default 8)");
}

int run_advise(const AdviseOptions& o, std::ostream& out, std::ostream& err) {
    FilePresets presets = command_presets(o.sim.scenario.preset_dirs, err);
    // The loader's per-worker rate may be unknown: advise infers it from what was observed.
    auto sc = simulate_scenario(o.sim, presets, nullptr, false);
    if (!sc) return report_error(sc.error(), err);
    Observations obs;
    std::vector<Diagnostic> errs;
    obs.step_s = checked_option("observed_step_s", o.step_s, errs);
    obs.tokens_per_s = checked_option("observed_tokens_per_s", o.tokens_per_s, errs);
    obs.gpu_util_pct = checked_option("gpu_util", o.util, errs);
    if (auto gbv = checked_option("observed_peak_memory_gb", o.peak_gb, errs)) obs.peak_memory_bytes = *gbv * units::GB;
    obs.gpu_temp_c = checked_option("gpu_temp", o.temp, errs);
    obs.sm_clock_mhz = checked_option("gpu_clock_mhz", o.clock, errs);
    obs.util_swings = o.swings;
    obs.oom = o.oom;
    if (sc->run.loader_workers > 0) obs.loader_workers = sc->run.loader_workers;
    if (!o.storage.empty()) {
        if (o.storage == "hdd") obs.storage = Storage::HDD;
        else if (o.storage == "sata-ssd") obs.storage = Storage::SataSSD;
        else if (o.storage == "nvme") obs.storage = Storage::NVMe;
        else if (o.storage == "network") obs.storage = Storage::Network;
        else errs.push_back({"", 0, 0, "--storage", "--storage = \"" + o.storage + "\" is not one of: hdd, sata-ssd, nvme, network"});
    }
    checked_option("remedies", static_cast<double>(o.max_remedies), errs);
    if (!errs.empty()) return report_error(Error(errs), err);

    std::vector<Diagnostic> invalid;
    const AdviceContext ctx = advice_context(presets, *sc, &invalid);
    if (!invalid.empty()) return report_error(Error(invalid), err);
    const AdviceReport rep = advise(*sc, obs, ctx, o.max_remedies);
    const Diagnosis& d = rep.diagnosis;
    // Prediction intervals (issue 13): the step-time band of this scenario's regime.
    const std::optional<RatioBand> band = app::prediction_band(packaged_residuals(presets), BandKind::StepTime, *sc);
    if (o.sim.json) {
        nlohmann::json rem = nlohmann::json::array();
        for (const auto& a : rep.remedies) {
            nlohmann::json j = scenario_json(a.scenario);
            j["title"] = a.title;
            j["changes"] = a.changes;
            j["assumption"] = a.assumption;
            j["changes_result"] = a.changes_result;
            j["extra_gpus"] = a.extra_gpus;
            j["hardware_change"] = a.hardware_change;
            j["speedup"] = a.speedup;
            j["fixes_memory"] = a.fixes_memory;
            j["tokens_per_s"] = a.time.throughput.tokens_per_s;
            j["step_s"] = a.time.time.step_s;
            j["memory"] = memory_json(a.memory);
            rem.push_back(j);
        }
        nlohmann::json j = scenario_json(*sc);
        j["diagnosis"] = {{"bottleneck", to_string(d.bottleneck)}, {"headline", d.headline}, {"evidence", d.evidence},
                          {"observation_gap", d.observation_gap}, {"disagrees", d.disagrees}};
        j["memory"] = memory_json(rep.memory);
        j["throughput"] = {{"tokens_per_s", rep.time.throughput.tokens_per_s}, {"observed_tokens_per_s", rep.observed_tokens_per_s},
                           {"mfu", rep.time.throughput.mfu}};
        j["time"] = {{"step_s", rep.time.time.step_s}};
        if (band) app::add_time_band(j, rep.time, *band);
        j["remedies"] = rem;
        out << j.dump(2) << '\n';
        return 0;
    }
    out << fmt::format("{} on {}\nsetup: {}\n\n", sc->model.name, describe_hardware(*sc), describe_setup(*sc));
    out << fmt::format("DIAGNOSIS: {} -- {}\n", to_string(d.bottleneck), d.headline);
    for (const auto& e : d.evidence) out << "  - " << e << '\n';
    if (band)
        out << fmt::format("  - predicted {:.0f} ({:.0f}-{:.0f}) tokens/s, step {:.3f} ({:.3f}-{:.3f}) s: P10-P90 from the validation residuals ({}, {} cases)\n",
                           rep.time.throughput.tokens_per_s, rep.time.throughput.tokens_per_s / band->p90, rep.time.throughput.tokens_per_s / band->p10,
                           rep.time.time.step_s, rep.time.time.step_s * band->p10, rep.time.time.step_s * band->p90, band->regime, band->n);
    if (!d.observation_gap.empty()) out << "  " << d.observation_gap << '\n';
    if (rep.remedies.empty()) {
        out << (rep.memory.fits() ? "\nNo remedy among those tried improves on this setup by 2 % or more.\n"
                                  : "\nNo remedy among those tried makes it fit on this hardware.\n");
        return 0;
    }
    out << (rep.memory.fits() ? "\nRemedies that help, each re-simulated (the diagnosed bottleneck first, same hardware before what money buys, by effect):\n"
                              : "\nChanges that make it fit, each re-simulated (same hardware before what money buys, fastest first):\n");
    int i = 1;
    for (const auto& a : rep.remedies) {
        const std::string effect = a.fixes_memory ? "     fits" : fmt::format("{:>5.2f}x tokens/s", a.speedup);
        out << fmt::format("  {}. {:<52} {}  ({:.0f} tokens/s, {} per GPU{})\n", i++, a.title, effect,
                           a.time.throughput.tokens_per_s, gb(a.memory.total),
                           a.extra_gpus > 0 ? fmt::format(", +{} GPU{}", a.extra_gpus, a.extra_gpus == 1 ? "" : "s") : a.hardware_change.empty() ? "" : ", new: " + a.hardware_change);
        for (const auto& c : a.changes) out << "       " << c << '\n';
        out << "       assumes: " << a.assumption << (a.changes_result ? "  [changes what is trained]" : "") << '\n';
    }
    return 0;
}

}  // namespace trainplan::cli
