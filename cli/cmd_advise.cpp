#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "trainplan/app/format.hpp"
#include "trainplan/advisor.hpp"
#include "trainplan/units.hpp"

namespace trainplan::cli {

void setup_advise(CLI::App& app, AdviseOptions& o) {
    setup_simulate(app, o.sim);
    app.remove_option(app.get_option("--csv"));
    auto* g = "What you observe (optional)";
    app.add_option("--observed-step-s", o.step_s, "Measured seconds per optimizer step")->group(g);
    app.add_option("--observed-tokens-per-s", o.tokens_per_s, "Measured tokens per second (whole job)")->group(g);
    app.add_option("--gpu-util", o.util, "Average GPU utilization in % (nvidia-smi)")->group(g);
    app.add_flag("--util-swings", o.swings, "Utilization swings between ~0 and 100 %")->group(g);
    app.add_option("--observed-peak-memory-gb", o.peak_gb, "Peak memory per GPU seen (GB)")->group(g);
    app.add_flag("--oom", o.oom, "The run stops with CUDA out of memory")->group(g);
    app.add_option("--gpu-temp", o.temp, "GPU temperature under load (C)")->group(g);
    app.add_option("--gpu-clock-mhz", o.clock, "Sustained SM clock under load (MHz)")->group(g);
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
    auto positive = [&](const std::optional<double>& v, const char* flag, double lo, double hi) -> std::optional<double> {
        if (!v) return std::nullopt;
        if (!(*v >= lo && *v <= hi)) {
            errs.push_back({"", 0, 0, flag, fmt::format("{} = {:g} must be between {:g} and {:g}", flag, *v, lo, hi)});
            return std::nullopt;
        }
        return v;
    };
    obs.step_s = positive(o.step_s, "--observed-step-s", 1e-6, 1e7);
    obs.tokens_per_s = positive(o.tokens_per_s, "--observed-tokens-per-s", 1e-3, 1e12);
    obs.gpu_util_pct = positive(o.util, "--gpu-util", 0, 100);
    if (auto gbv = positive(o.peak_gb, "--observed-peak-memory-gb", 0, 1e5)) obs.peak_memory_bytes = *gbv * units::GB;
    obs.gpu_temp_c = positive(o.temp, "--gpu-temp", 0, 130);
    obs.sm_clock_mhz = positive(o.clock, "--gpu-clock-mhz", 50, 10000);
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
    if (o.max_remedies < 1 || o.max_remedies > 100) errs.push_back({"", 0, 0, "--remedies", fmt::format("--remedies = {} must be between 1 and 100", o.max_remedies)});
    if (!errs.empty()) return report_error(Error(errs), err);

    std::vector<Diagnostic> invalid;
    const AdviceContext ctx = advice_context(presets, *sc, &invalid);
    if (!invalid.empty()) return report_error(Error(invalid), err);
    const AdviceReport rep = advise(*sc, obs, ctx, o.max_remedies);
    const Diagnosis& d = rep.diagnosis;
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
            j["tokens_per_s"] = a.time.throughput.tokens_per_s;
            j["step_s"] = a.time.time.step_s;
            j["memory"] = memory_json(a.memory);
            rem.push_back(j);
        }
        nlohmann::json j = scenario_json(*sc);
        j["diagnosis"] = {{"bottleneck", to_string(d.bottleneck)}, {"headline", d.headline}, {"evidence", d.evidence},
                          {"observation_gap", d.observation_gap}};
        j["memory"] = memory_json(rep.memory);
        j["throughput"] = {{"tokens_per_s", rep.time.throughput.tokens_per_s}, {"observed_tokens_per_s", rep.observed_tokens_per_s},
                           {"mfu", rep.time.throughput.mfu}};
        j["time"] = {{"step_s", rep.time.time.step_s}};
        j["remedies"] = rem;
        out << j.dump(2) << '\n';
        return 0;
    }
    out << fmt::format("{} on {}\nsetup: {}\n\n", sc->model.name, describe_hardware(*sc), describe_setup(*sc));
    out << fmt::format("DIAGNOSIS: {} -- {}\n", to_string(d.bottleneck), d.headline);
    for (const auto& e : d.evidence) out << "  - " << e << '\n';
    if (!d.observation_gap.empty()) out << "  " << d.observation_gap << '\n';
    if (rep.remedies.empty()) {
        out << "\nNo remedy among those tried improves on this setup by 2 % or more.\n";
        return 0;
    }
    out << "\nRemedies, each re-simulated (same hardware first, then what money buys):\n";
    int i = 1;
    for (const auto& a : rep.remedies) {
        out << fmt::format("  {}. {:<52} {:>5.2f}x tokens/s  ({:.0f} tokens/s, {} per GPU{})\n", i++, a.title, a.speedup,
                           a.time.throughput.tokens_per_s, gb(a.memory.total),
                           a.extra_gpus > 0 ? fmt::format(", +{} GPUs", a.extra_gpus) : a.hardware_change.empty() ? "" : ", new: " + a.hardware_change);
        for (const auto& c : a.changes) out << "       " << c << '\n';
        out << "       assumes: " << a.assumption << (a.changes_result ? "  [changes what is trained]" : "") << '\n';
    }
    return 0;
}

}  // namespace trainplan::cli
