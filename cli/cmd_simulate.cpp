#include <fmt/format.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "trainplan/app/intervals.hpp"
#include "trainplan/intervals.hpp"
#include "trainplan/opgraph.hpp"
#include "trainplan/app/format.hpp"
#include "trainplan/time.hpp"
#include "trainplan/units.hpp"

namespace trainplan::cli {

void setup_simulate(CLI::App& app, SimulateOptions& o) {
    add_scenario_flags(app, o.scenario, true);
    auto* run = "Run, data and cost";
    add_option_field(app, "tokens", o.tokens, run);
    app.add_option(option_field("rent").flag, o.rent, std::string(option_field("rent").help) + "; a bare USD is the scenario's GPU")->group(run);
    app.add_option(std::string(option_field("price").flag) + ",--gpu-price", o.price,
                   std::string(option_field("price").help) + "; a bare USD is the scenario's GPU")->group(run);
    add_option_field(app, "amortization_years", o.amortize_years, run);
    add_option_field(app, "electricity_usd_per_kwh", o.electricity, run);
    add_option_field(app, "pue", o.pue, run);
    add_option_field(app, "loader_workers", o.loader_workers, run);
    add_option_field(app, "worker_samples_per_s", o.worker_samples, run);
    add_option_field(app, "storage_gb_s", o.storage_gb_s, run);
    add_option_field(app, "sustained_clock", o.sustained_clock, run);
    app.add_flag("--json", o.json, "Machine-readable output (names as in the design reference)");
    app.add_flag("--csv", o.csv, "One CSV header line and one row");
}

namespace {

std::string secs(double s) {
    if (s >= 86400 * 2) return fmt::format("{:.1f} days", s / 86400);
    if (s >= 7200) return fmt::format("{:.1f} h", s / 3600);
    if (s >= 1) return fmt::format("{:.3f} s", s);
    return fmt::format("{:.2f} ms", s * 1e3);
}

}  // namespace

Result<Scenario> simulate_scenario(const SimulateOptions& o, FilePresets& presets, std::int64_t* deferred_global_batch,
                                   bool require_worker_rate) {
    auto sc = build_scenario(o.scenario, presets, deferred_global_batch);
    if (!sc) return sc;
    RunOptions& r = sc->run;
    std::vector<Diagnostic> errs;
    auto set = [&](const char* key, const std::optional<double>& v, double& out, double scale = 1) {
        if (auto c = checked_option(key, v, errs)) out = *c * scale;
    };
    set("tokens", o.tokens, r.tokens_to_train);
    set("amortization_years", o.amortize_years, r.amortization_years);
    set("electricity_usd_per_kwh", o.electricity, r.electricity_usd_per_kwh);
    set("pue", o.pue, r.pue);
    set("worker_samples_per_s", o.worker_samples, r.worker_samples_per_s);
    set("sustained_clock", o.sustained_clock, r.sustained_clock);
    set("storage_gb_s", o.storage_gb_s, r.storage_bytes_per_s, units::GB);
    if (auto w = checked_option("loader_workers", o.loader_workers, errs)) r.loader_workers = static_cast<int>(*w);
    // --rent / --price: GPU=USD as in size; a bare amount is the scenario's GPU.
    auto priced = [&](const std::vector<std::string>& items, const char* key, double& out) {
        std::vector<std::string> pairs;
        for (const auto& it : items) pairs.push_back(it.find('=') == std::string::npos ? sc->cluster.gpu.id + "=" + it : it);
        std::map<std::string, double> table;
        parse_priced(pairs, key, presets, table, errs);
        if (table.empty()) return;
        if (auto it = table.find(sc->cluster.gpu.id); it != table.end()) out = it->second;
        else
            errs.push_back({"", 0, 0, option_field(key).flag,
                            fmt::format("{} names {} but the scenario's GPU is {}", option_field(key).flag, table.begin()->first,
                                        sc->cluster.gpu.id)});
    };
    priced(o.rent, "rent", r.rent_usd_per_gpu_hour);
    priced(o.price, "price", r.purchase_usd_per_gpu);
    if (require_worker_rate && r.loader_workers > 0 && r.worker_samples_per_s <= 0)
        errs.push_back({"", 0, 0, "--worker-samples-per-s", "--loader-workers needs --worker-samples-per-s (how fast one worker prepares samples)"});
    if (!errs.empty()) return Error(errs);
    return sc;
}

int run_simulate(const SimulateOptions& o, std::ostream& out, std::ostream& err) {
    FilePresets presets = command_presets(o.scenario.preset_dirs, err);
    auto sc = simulate_scenario(o, presets);
    if (!sc) return report_error(sc.error(), err);
    // README / design exit codes: 0 fits, 1 does not fit, 2 bad input.
    const Scenario& s = *sc;
    const MemoryEstimate mem = estimate_memory(s);
    const int exit_code = mem.peak().fits() ? 0 : 1;
    const TimeEstimate te = estimate_time(s);
    const TimeBreakdown& t = te.time;
    const Throughput& th = te.throughput;
    const CostEstimate& c = te.cost;
    for (const Diagnostic& w : te.warnings) err << "warning: " << w.message << '\n';
    // Prediction intervals (issue 13): P10 / P90 of measured / predicted on the
    // validation cases of the matching regime (intervals.hpp); absent without them.
    // Calibrated: the fit's own residual spread, where it has the degrees of freedom (app/intervals.hpp).
    const std::optional<IntervalTable> table = packaged_residuals(presets);
    const std::optional<RatioBand> tband = app::prediction_band(table, BandKind::StepTime, s);
    const std::optional<RatioBand> mband = app::prediction_band(table, BandKind::Memory, s);
    auto range = [](const std::optional<RatioBand>& b, double v, const std::function<std::string(double)>& f) {
        return b && b->n > 0 ? fmt::format(" ({}-{})", f(v * b->p10), f(v * b->p90)) : std::string();
    };

    if (o.json) {
        nlohmann::json j = scenario_json(s);
        if (!s.calibration.identity())
            j["calibration"] = {{"profile", s.calibration.source}, {"gemm", s.calibration.gemm}, {"attention", s.calibration.attention},
                                {"hbm", s.calibration.hbm}, {"intra_link", s.calibration.intra_link}, {"inter_link", s.calibration.inter_link},
                                {"reserve_fraction", s.calibration.reserve_fraction}, {"framework_bytes", s.calibration.framework_bytes}};
        j["memory"] = memory_json(mem.peak());
        j["time"] = {{"step_s", t.step_s}, {"compute_s", t.compute_s}, {"communication_s", t.communication_s},
                     {"bubble_s", t.bubble_s}, {"optimizer_s", t.optimizer_s}, {"offload_s", t.offload_s}, {"data_s", t.data_s},
                     {"recompute_s", t.recompute_s}, {"memory_bound_s", t.memory_bound_s}, {"thermal_s", t.thermal_s}, {"host_s", t.host_s}, {"zero3_hooks_s", t.zero3_hooks_s}, {"tp_comm_s", t.tp_comm_s}, {"pp_comm_s", t.pp_comm_s}, {"tied_embedding_s", t.tied_embedding_s},
                     {"dp_comm_s", t.dp_comm_s}, {"dp_exposed_s", t.dp_exposed_s}, {"fsdp_copies_s", t.fsdp_copies_s}, {"overlap_contention_s", t.overlap_contention_s}, {"ep_comm_s", t.ep_comm_s}, {"cp_comm_s", t.cp_comm_s}, {"cp_exposed_s", t.cp_exposed_s},
                     {"dp_intra_node_bytes", t.dp_intra_bytes}, {"dp_inter_node_bytes", t.dp_inter_bytes}};
        j["throughput"] = {{"tokens_per_s", th.tokens_per_s}, {"samples_per_s", th.samples_per_s},
                           {"tflops_per_gpu", th.model_tflops_per_gpu}, {"hardware_tflops_per_gpu", th.hardware_tflops_per_gpu},
                           {"mfu", th.mfu}, {"hfu", th.hfu}, {"model_flops_per_token", th.model_flops_per_token},
                           {"scaling_efficiency", te.scaling_efficiency}};
        j["placement"] = {{"tp", te.placement.tp_link}, {"pp", te.placement.pp_link}, {"dp", te.placement.dp_link}, {"ep", te.placement.ep_link}, {"cp", te.placement.cp_link}};
        j["cost"] = {{"tokens", s.run.tokens_to_train}, {"train_time_s", c.train_time_s}, {"gpu_hours", c.gpu_hours},
                     {"energy_kwh", c.energy_kwh}, {"energy_cost_usd", c.energy_cost_usd}, {"rent_cost_usd", c.rent_cost_usd},
                     {"purchase_cost_usd", c.purchase_cost_usd}, {"power_w", c.power_w}};
        if (tband) app::add_time_band(j, te, *tband);
        if (mband) app::add_memory_band(j, mem.peak().total, *mband);
        out << j.dump(2) << '\n';
        return exit_code;
    }
    if (o.csv) {
        out << "model,gpu,gpus,tp,pp,dp,micro_batch,global_batch,seq_len,step_s,compute_s,communication_s,bubble_s,optimizer_s,"
               "offload_s,data_s,tokens_per_s,tflops_per_gpu,mfu,hfu,memory_total_bytes,fits\n";
        out << fmt::format("{},{},{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.4f},{:.4f},{:.6g},{}\n",
                           s.model.id, s.cluster.gpu.id, s.cluster.num_gpus, s.setup.layout.tp, s.setup.layout.pp,
                           s.setup.layout.dp, s.setup.micro_batch, s.setup.global_batch(), s.setup.seq_len, t.step_s, t.compute_s,
                           t.communication_s, t.bubble_s, t.optimizer_s, t.offload_s, t.data_s, th.tokens_per_s,
                           th.model_tflops_per_gpu, th.mfu, th.hfu, mem.peak().total, mem.peak().fits() ? "true" : "false");
        return exit_code;
    }

    out << fmt::format("{}{} on {}\n", s.model.name, s.model.approximate ? " [approximate]" : "", describe_hardware(s));
    out << "setup: " << describe_setup(s) << "\n";
    if (!s.calibration.identity()) {
        // Which factors the profile changes (the GUI shows the same text).
        const Calibration& k = s.calibration;
        const std::string changed = app::describe_calibration(k);
        out << "calibrated (" << k.source << "): " << changed << "\n";
    }
    out << fmt::format("memory: {}{} of {} per GPU ({})\n\n", gb(mem.peak().total), range(mband, mem.peak().total, gb), gb(mem.peak().capacity),
                       mem.peak().fits() ? "fits" : "DOES NOT FIT -- see trainplan fit");
    auto row = [&](const char* name, double v, const std::string& note) {
        out << fmt::format("  {:<15}{:>12} {:>6.1f} %   {}\n", name, secs(v), 100.0 * v / t.step_s, note);
    };
    out << "Step time\n";
    row("compute", t.compute_s, fmt::format("{} micro-batch(es) fwd+bwd{}{}", s.setup.grad_accum,
                                            t.recompute_s > 0 ? fmt::format(", recompute {}", secs(t.recompute_s)) : "",
                                            t.host_s > 0 ? fmt::format(", GPU waiting on {} {}",
                                                                       t.zero3_hooks_s > 0 ? "kernel launches and ZeRO-3's per-module hooks"
                                                                                           : "kernel launches",
                                                                       secs(t.host_s))
                                                         : ""));
    std::string comm;
    if (t.tp_comm_s > 0) comm += fmt::format("TP {} on {}; ", secs(t.tp_comm_s), te.placement.tp_link);
    if (t.pp_comm_s > 0)
        comm += fmt::format("PP {} on {}{}; ", secs(t.pp_comm_s), te.placement.pp_link,
                            t.tied_embedding_s > 0 ? fmt::format(" (tied embeddings' gradient all-reduce {} of it)", secs(t.tied_embedding_s)) : "");
    if (t.dp_comm_s > 0) {
        std::string parts;
        if (t.fsdp_copies_s > 0) parts += fmt::format(", incl. FSDP2's buffer copies on the compute stream {}", secs(t.fsdp_copies_s));
        // A group that spans nodes moves its bytes over both tiers (NVLink inside the node, the
        // network across): name both where both carry some.
        const std::string on = t.dp_intra_bytes > 0 && t.dp_inter_bytes > 0
                                   ? fmt::format("{} and {}", s.cluster.intra_node.id, s.cluster.inter_node.id)
                                   : te.placement.dp_link;
        comm += fmt::format("DP {} on {} ({} exposed{}); ", secs(t.dp_comm_s), on, secs(t.dp_exposed_s), parts);
    }
    if (t.ep_comm_s > 0) comm += fmt::format("EP {} on {}; ", secs(t.ep_comm_s), te.placement.ep_link);
    if (t.cp_comm_s > 0) comm += fmt::format("CP K/V ring {} on {} ({} exposed); ", secs(t.cp_comm_s), te.placement.cp_link, secs(t.cp_exposed_s));
    if (t.overlap_contention_s > 0)
        comm += fmt::format("incl. {} of compute slowed beside the collectives it hides ({}); ", secs(t.overlap_contention_s),
                            s.cluster.gpu.vendor == "amd" ? "the compute units RCCL holds" : "the SMs NCCL holds");
    row("communication", t.communication_s, comm.empty() ? "none" : comm.substr(0, comm.size() - 2));
    row("bubble", t.bubble_s, s.setup.layout.pp > 1 ? fmt::format("(p-1)/(m v) = {:.3f}", (s.setup.layout.pp - 1.0) / (s.setup.grad_accum * s.setup.layout.vp)) : "");
    row("optimizer", t.optimizer_s, s.setup.optimizer_offload != Offload::None ? "on the CPU (see offload)" : "memory-bound update");
    std::string offload;
    if (t.offload_s > 0) {
        if (s.setup.optimizer_offload != Offload::None) offload = "CPU optimizer + PCIe transfers";
        if (s.setup.activation_offload) offload += std::string(offload.empty() ? "" : "; ") + "saved activations to the host and back";
        if (t.paging_s > 0) offload += std::string(offload.empty() ? "" : "; ") + "paged optimizer states in and out over PCIe";
    }
    row("offload", t.offload_s, offload);
    row("data stall", t.data_s, s.run.loader_workers > 0 ? fmt::format("{} workers per GPU", s.run.loader_workers) : "pre-tokenized data assumed");
    out << "  " << std::string(27, '-') << '\n';
    out << fmt::format("  {:<15}{:>12}{}\n", "step", secs(t.step_s), range(tband, t.step_s, secs));
    if (tband && tband->n > 0) {
        if (calibrated_band(s.calibration, BandKind::StepTime))
            out << fmt::format("  (P10-P90 from the residuals of calibration profile {}: {})\n", s.calibration.source, tband->regime);
        else
            out << fmt::format("  (P10-P90 from {} validation cases, {}{})\n", tband->n, tband->regime,
                               s.calibration.identity() ? "" : "; calibrated with " + s.calibration.source);
    }
    if (t.thermal_s > 0)
        out << fmt::format("  (sustained clock {:.0f} % of {} adds {})\n", 100 * s.run.sustained_clock, s.cluster.gpu.reference_clock_name(),
                           secs(t.thermal_s));
    out << fmt::format("\nThroughput: {:.0f} tokens/s ({:.1f} per GPU), {:.2f} samples/s\n", th.tokens_per_s,
                       th.tokens_per_s / s.cluster.num_gpus, th.samples_per_s);
    out << fmt::format("Per GPU: {:.1f} model TFLOP/s, {:.1f} hardware TFLOP/s of {:.0f} peak -> MFU {:.1f} %, HFU {:.1f} %\n",
                       th.model_tflops_per_gpu, th.hardware_tflops_per_gpu, th.peak_flops / units::TFLOPS, 100 * th.mfu, 100 * th.hfu);
    out << "  (model FLOPs per token = 6 x matmul parameters + 12 L h s attention, PaLM convention"
        << (s.setup.method == Method::Full ? "" : ", N = the base model's, also under LoRA / QLoRA")
        << "; HFU counts the FLOPs executed: "
        << (fused_attention_runs(s.setup) ? "causal attention as the fused kernel runs it, " : "")
        << (fused_attention_runs(s.setup) && attention_window_share(s.model, s.setup.seq_len) < 1.0
                ? fmt::format("only the pairs inside the {}-token sliding window on its local layers, ", s.model.sliding_window)
                : "")
        << "recompute added"
        << (s.setup.method == Method::Full ? "" : ", frozen weights' gradient GEMMs removed, adapter GEMMs added") << ")\n";
    if (const double share = power_limited_share(s.cluster.gpu); share < 1.0) {
        const GpuSpec& g = s.cluster.gpu;
        out << fmt::format("  (GEMMs at the rate this GPU holds at its power limit, {:.0f} % of a short burst's: {:.1f} of {:.1f} bf16 TFLOP/s{})\n",
                           100 * share, g.sustained_matmul_flops / units::TFLOPS, burst_matmul_flops(g) / units::TFLOPS,
                           g.sustained_clock_mhz > 0 ? fmt::format(", SM clock {:.0f} MHz", g.sustained_clock_mhz) : "");
    }
    if (s.setup.precision == Precision::FP8Mixed && s.cluster.gpu.fp8_matmul_efficiency > 0) {
        const GpuSpec& g = s.cluster.gpu;
        const double fp8 = g.peak_flops(NumericFormat::FP8);
        out << fmt::format("  (FP8 GEMMs at {:.1f} of {:.0f} fp8 TFLOP/s: the measured FP8 burst rate, {:.1f} % of peak where bf16 reaches {:.1f} %{})\n",
                           fp8 * fp8_gemm_fraction(g) / units::TFLOPS, fp8 / units::TFLOPS, 100 * g.fp8_matmul_efficiency,
                           100 * burst_matmul_flops(g) / g.peak_flops(NumericFormat::BF16),
                           power_limited_share(g) < 1.0 ? ", at the same power-limited share" : "");
    }
    if (s.cluster.num_gpus > 1)
        out << fmt::format("Scaling efficiency: {:.0f} % of linear (per-GPU work {} vs step {})\n", 100 * te.scaling_efficiency,
                           secs(te.single_gpu_step_s), secs(t.step_s));
    if (s.run.tokens_to_train > 0) {
        out << fmt::format("\nTo train {:.3g} tokens: {} on {} GPUs = {:.0f} GPU-hours\n", s.run.tokens_to_train, secs(c.train_time_s),
                           s.cluster.num_gpus, c.gpu_hours);
        out << fmt::format("  energy {:.0f} kWh at {:.1f} kW (PUE {:g}) = ${:.0f} at ${:g}/kWh\n", c.energy_kwh, c.power_w / 1e3,
                           s.run.pue, c.energy_cost_usd, s.run.electricity_usd_per_kwh);
        if (c.rent_cost_usd > 0) out << fmt::format("  rent ${:.0f} at ${:g}/GPU-hour\n", c.rent_cost_usd, s.run.rent_usd_per_gpu_hour);
        else out << "  rent: give --rent $/GPU-hour for a rental cost\n";
        if (c.purchase_cost_usd > 0)
            out << fmt::format("  purchase: ${:.0f} amortized share ({:g} years straight-line)\n", c.purchase_cost_usd, s.run.amortization_years);
    }
    return exit_code;
}

}  // namespace trainplan::cli
