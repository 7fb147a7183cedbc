#include <fmt/format.h>

#include <cmath>

#include "commands.hpp"
#include "trainplan/app/format.hpp"
#include "trainplan/app/intervals.hpp"
#include "trainplan/fit.hpp"
#include "trainplan/units.hpp"

namespace trainplan::cli {

void setup_fit(CLI::App& app, FitOptions& o) {
    add_scenario_flags(app, o.scenario, true);
    app.add_flag("--json", o.json, "Machine-readable output (names as in the design reference)");
    app.add_flag("--stages", o.all_stages, "Show every pipeline stage, not only the worst");
    app.add_option("--remedies", o.max_remedies, "How many fixes to list when it does not fit (default 6)");
}

int report_error(const Error& e, std::ostream& err) {
    // One diagnostic, one line: a newline or escape inside a value is shown escaped.
    for (const auto& d : e.diagnostics) err << printable(d.to_string()) << '\n';
    return 2;
}

namespace {

void print_breakdown(std::ostream& out, const MemoryBreakdown& m, const StageMemory& st, const Scenario& s) {
    const TrainingSetup& t = s.setup;
    auto row = [&](const char* name, double v, const std::string& note) {
        out << fmt::format("  {:<15}{:>12}   {}\n", name, gb(v), note);
    };
    const BytesPerParam bpp = bytes_per_trainable_param(t);
    std::string wnote = t.method == Method::QLoRA ? (fp32_stream(t) ? "4-bit base + fp32 embeddings, norms, head and adapters"
                                                                         : "4-bit base + 16-bit adapters")
                        : t.method == Method::LoRA ? fmt::format("frozen {:g}-bit base + adapters", 8 * frozen_linear_bytes(t))
                                                   : fmt::format("{:g} B/param", bpp.weights);
    if (t.zero_stage >= 3) wnote += fmt::format(", sharded over {}", t.layout.dp);
    if (t.method == Method::Full && t.fsdp == FsdpStrategy::ShardGradOp)
        wnote += fmt::format(" sharded over {} + every unit gathered in {:g} bytes, held from forward to backward", t.layout.dp,
                             activation_bytes_per_elem(t.precision));
    if (t.param_offload != Offload::None) wnote = "offloaded to " + std::string(to_string(t.param_offload));
    row("weights", m.weights, wnote);
    std::string gnote = t.zero_stage >= 2    ? fmt::format("sharded over {}", t.layout.dp)
                        : m.ddp_buckets > 0 ? "incl. " + gb(m.ddp_buckets) + " DDP bucket copy (gradient_as_bucket_view off)"
                                            : "";
    if (m.grads_at_step > 0)
        gnote += (gnote.empty() ? "" : "; ") + std::string("the head's and one layer's at backward's start; all ") +
                 gb(m.all_gradients() - m.ddp_buckets) + " from late in backward to the step (zero_grad frees them between steps)";
    row("gradients", m.gradients, gnote);
    std::string onote = m.master_weights > 0 ? "incl. " + gb(m.master_weights) + " fp32 master weights" : "";
    if (t.optimizer_offload != Offload::None) onote = "offloaded to " + std::string(to_string(t.optimizer_offload));
    if (m.managed > 0) onote += (onote.empty() ? "" : "; ") + gb(m.managed) + " paged (unified memory: not in torch's allocated / reserved)";
    if (m.paged_out > 0) onote += (onote.empty() ? "" : "; ") + gb(m.paged_out) + " paged out to host";
    row("optimizer", m.optimizer, onote);
    row("activations", m.activations,
        fmt::format("{} layers x {:g} micro-batch{} in flight, recompute {}", st.layers, st.microbatches_in_flight,
                    st.microbatches_in_flight == 1 ? "" : "es", to_string(t.recompute)));
    row("logits", m.logits,
        m.logits <= 0          ? ""
        : fused_linear_ce_on(t) ? "Liger fused linear cross-entropy: one token chunk's logits + the input's gradient"
                               : fmt::format("loss copies of the logits ({} stack)", to_string(t.stack)));
    std::string tnote = "buffers, gathered layers, a layer's backward working set";
    if (m.peak_at_step)
        tnote = m.step_copies > 0 ? "peak at the optimizer step: " + gb(m.step_copies) + " of " + step_copies_name(t) +
                                        (m.grads_at_step > 0 ? " beside every gradient" : "") + ", partly in the freed activations' place"
                                  : "peak at the optimizer step: every gradient, in the freed activations' place";
    if (m.peak_at_backward_end) tnote = "peak at backward's end: every gradient beside the first layer's backward working set";
    row("temporary", m.temporary, tnote);
    row("framework", m.framework,
        m.nccl_communicators > 0 ? fmt::format("CUDA context, cuBLAS workspace, {} NCCL buffers of {} communicator{}{}", gb(m.nccl_buffers),
                                               m.nccl_communicators, m.nccl_communicators == 1 ? "" : "s",
                                               m.nccl_nvls > 0 ? fmt::format(" (incl. {} NVLink SHARP, NCCL {})", gb(m.nccl_nvls), t.nccl == NcclRelease::Current ? "2.22 or later" : to_string(t.nccl)) : "")
                                 : "CUDA context, cuBLAS workspace");
    std::string reserve_parts;
    if (m.step_segments > 0) reserve_parts += gb(m.step_segments) + " of new segments for the step's gradient copies (no freed block fits them)";
    if (m.stream_pool > 0)
        reserve_parts += (reserve_parts.empty() ? "" : ", ") + gb(m.stream_pool) +
                         " of gradients freed into FSDP's own stream pool (forward cannot reuse them; given back before an out-of-memory)";
    if (m.gathered_ahead > 0)
        reserve_parts += (reserve_parts.empty() ? "" : ", ") + gb(m.gathered_ahead) +
                         " of layers gathered ahead of the compute (freed, held until the GPU reaches them; given back before an out-of-memory)";
    const std::string share =
        fmt::format("share of the transient bytes, {}{}", app::allocator_segments(t),
                    m.reserve_cut > 0 ? fmt::format(": {} on a card with room for it, {} here; cached blocks go back before an allocation fails",
                                                    gb(m.transient_reserve + m.reserve_cut), gb(m.transient_reserve))
                                      : "");
    row("fragmentation", m.fragmentation,
        reserve_parts.empty() ? "allocator reserve (" + share + ")" : "allocator reserve (" + share + "), incl. " + reserve_parts);
    out << "  " << std::string(27, '-') << '\n';
    const double smi = s.cluster.gpu.smi_total_bytes;
    out << fmt::format("  {:<15}{:>12}   of {} capacity ({:.2f} GiB{})\n", "total", gb(m.total), gb(m.capacity), m.capacity / units::GiB,
                       smi > m.capacity * (1 + 1e-9) ? fmt::format(", what CUDA can allocate of the card's {:.2f}: the driver reserves the rest", smi / units::GiB)
                                                     : "");
    out << fmt::format("  {:<15}{:>12}   torch.cuda.max_memory_allocated\n", "allocated", gb(m.allocated));
    out << fmt::format("  {:<15}{:>12}   torch.cuda.max_memory_reserved (allocated + reserve)\n", "reserved", gb(m.reserved()));
    if (m.cpu > 0) {
        if (m.host_capacity > 0)
            out << fmt::format("  {:<15}{:>12}   host memory per GPU, of {} (node RAM / GPUs on the node){}\n", "cpu", gb(m.cpu),
                               gb(m.host_capacity), m.host_fits() ? "" : ": DOES NOT FIT");
        else
            out << fmt::format("  {:<15}{:>12}   host memory per GPU ({} per node; node RAM not given, not checked: --host-ram GiB)\n", "cpu",
                               gb(m.cpu), gb(m.cpu * s.cluster.gpus_on_node()));
    }
    if (m.nvme > 0) out << fmt::format("  {:<15}{:>12}   NVMe per GPU\n", "nvme", gb(m.nvme));
}

}  // namespace

int run_fit(const FitOptions& o, std::ostream& out, std::ostream& err) {
    FilePresets presets = command_presets(o.scenario.preset_dirs, err);
    auto sc = build_scenario(o.scenario, presets);
    if (!sc) return report_error(sc.error(), err);
    std::vector<Diagnostic> option_errs;
    checked_option("remedies", static_cast<double>(o.max_remedies), option_errs);
    if (!option_errs.empty()) return report_error(Error(option_errs), err);
    const Scenario& s = *sc;

    FitReport rep = check_fit(s, o.max_remedies);
    if (o.all_stages) rep.estimate = estimate_memory(s, true);
    const MemoryBreakdown& peak = rep.estimate.peak();
    const StageMemory& worst = rep.estimate.stages[static_cast<size_t>(rep.estimate.worst)];
    // The P10-P90 band of the peak, the one simulate prints (app/intervals.hpp).
    const std::optional<RatioBand> mband = app::prediction_band(packaged_residuals(presets), BandKind::Memory, s);
    const bool banded = mband && mband->n > 0;

    if (o.json) {
        nlohmann::json j = scenario_json(s);
        j["memory"] = memory_json(peak);
        j["memory"]["worst_stage"] = worst.stage;
        if (banded) app::add_memory_band(j, peak.total, *mband);
        j["params"] = {{"total", rep.estimate.total_params}, {"trainable", rep.estimate.trainable_params}};
        nlohmann::json stages = nlohmann::json::array();
        for (const auto& st : rep.estimate.stages) {
            nlohmann::json js = memory_json(st.mem);
            js["stage"] = st.stage;
            js["layers"] = st.layers;
            js["microbatches_in_flight"] = st.microbatches_in_flight;
            stages.push_back(js);
        }
        j["stages"] = stages;
        nlohmann::json rem = nlohmann::json::array();
        for (const auto& r : rep.remedies) {
            rem.push_back({{"title", r.title}, {"changes", r.changes}, {"cost", r.cost},
                           {"changes_result", r.changes_result}, {"extra_gpus", r.extra_gpus},
                           {"step_s", r.step_s}, {"slowdown", r.slowdown},
                           {"memory", memory_json(r.memory)}});
        }
        j["remedies"] = rem;
        out << j.dump(2) << '\n';
        return rep.fits ? 0 : 1;
    }

    out << fmt::format("{}{} on {}\n", s.model.name, s.model.approximate ? " [approximate]" : "", describe_hardware(s));
    out << describe_params(s, rep.estimate.trainable_params) << '\n';
    out << "setup: " << describe_setup(s) << "\n\n";

    for (const auto& st : rep.estimate.stages) {
        if (!o.all_stages && st.stage != worst.stage) continue;
        if (s.setup.layout.pp > 1)
            out << fmt::format("Memory per GPU, pipeline stage {} of {}{}\n", st.stage + 1, s.setup.layout.pp,
                               st.stage == worst.stage ? " (worst)" : "");
        else
            out << "Memory per GPU\n";
        print_breakdown(out, st.mem, st, s);
        out << '\n';
    }

    if (banded) {
        out << fmt::format("P10-P90 of the peak: {}-{} (from {} validation cases, {}){}\n", gb(peak.total * mband->p10),
                           gb(peak.total * mband->p90), mband->n, mband->regime,
                           rep.fits && over_capacity_at_p90(*mband, peak.firm(), peak.capacity) ? "; at the P90 end it does not fit" : "");
    }
    if (rep.fits) {
        const std::string back = given_back_text(peak);
        out << fmt::format("FITS: {} headroom ({:.0f} % of capacity free{})\n", gb(peak.headroom()),
                           100.0 * peak.headroom() / peak.capacity,
                           back.empty() ? std::string() : ", counting the " + back + " as free: they are given back before an out-of-memory");
        return 0;
    }
    if (peak.total <= peak.capacity)  // the GPU holds it; the node's RAM does not hold what is offloaded
        out << fmt::format("DOES NOT FIT in host memory: {} per GPU offloaded, {} over the {} each GPU's share of the node's RAM allows\n",
                           gb(peak.cpu), gb(peak.cpu - peak.host_capacity), gb(peak.host_capacity));
    else
        out << fmt::format("DOES NOT FIT: {} over capacity (needs {:.1f}x the memory)\n", gb(-peak.headroom()),
                           peak.total / peak.capacity);
    if (rep.remedies.empty()) {
        out << "\nNo single change or small combination makes it fit on this hardware; try a larger GPU "
               "(trainplan gpus) or a smaller model.\n";
        return 1;
    }
    // Each remedy's memory as what it needs (firm(): the allocator's cached blocks
    // and the layers gathered ahead give way before an out-of-memory) beside its
    // peak: under ZeRO-3 the peak fills whatever card it is on, so the peak alone
    // would read the same for every remedy.
    out << fmt::format("\nChanges that make it fit, cheapest first (by simulated time per token; more GPUs last);\n"
                       "needs = {}, peak = what the card would show:\n",
                       app::kNeedsMeaning);
    int i = 1;
    for (const auto& r : rep.remedies) {
        out << fmt::format("  {}. {:<58} needs {:>9}, peak {:>9}  ({} headroom)\n", i++, r.title, gb(r.memory.firm()),
                           gb(r.memory.total), gb(r.memory.headroom()));
        for (const auto& c : r.changes) out << "       " << c << '\n';
        if (r.memory.cpu > 0)  // offload moves the states to the host: say how much RAM that takes
            out << fmt::format("       host RAM: {} per GPU{}\n", gb(r.memory.cpu),
                               r.memory.host_capacity > 0 ? fmt::format(" of the {} each GPU's share of the node allows", gb(r.memory.host_capacity))
                                                          : std::string(" (not checked: give --host-ram GiB per node)"));
        // (A change under half a percent reads "+0 %", not "-0 %".)
        const double pct = std::abs(100 * r.slowdown) < 0.5 ? 0.0 : 100 * r.slowdown;
        out << fmt::format("       time per token {:+.0f} % ({}); {}{}\n", pct,
                           r.extra_gpus > 0 ? fmt::format("+{} GPUs", r.extra_gpus) : "same GPUs", r.cost,
                           r.changes_result ? " [changes what is trained]" : "");
    }
    return 1;
}

}  // namespace trainplan::cli
