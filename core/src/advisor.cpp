#include "trainplan/advisor.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "trainplan/moves.hpp"
#include "trainplan/opgraph.hpp"
#include "trainplan/search.hpp"

#include "text.hpp"

namespace trainplan {

namespace {

std::string num(double v, int prec = 2) { return detail::fixed(v, prec); }

// ---- 1. observations that are mechanisms of the model -> the scenario as it runs

Scenario as_it_runs(const Scenario& s, const Observations& obs, std::vector<std::string>& assumptions) {
    Scenario cur = s;
    // The GEMM rate of a preset with a sustained (power-saturated) figure already
    // runs at the clock that figure was measured at: only a clock below it is
    // throttling beyond the board's own power limit.
    if (obs.sm_clock_mhz && s.cluster.gpu.reference_clock_mhz() > 0) {
        cur.run.sustained_clock = std::clamp(*obs.sm_clock_mhz / s.cluster.gpu.reference_clock_mhz(), 0.05, 1.0);
    } else if (obs.gpu_temp_c && *obs.gpu_temp_c >= 83) {
        // NVIDIA GPUs hold boost clocks up to their temperature target (83 C on
        // GeForce) and shed clock above it (seed 000: throttling at 83-90 C). Without a
        // measured clock we assume 15 % below boost.
        cur.run.sustained_clock = 0.85;
        assumptions.push_back("clock 15 % below boost at " + num(*obs.gpu_temp_c, 0) + " C (no clock reading given)");
    }
    if (obs.loader_workers) cur.run.loader_workers = *obs.loader_workers;
    if (obs.storage != Storage::Unknown && cur.run.storage_bytes_per_s <= 0)
        cur.run.storage_bytes_per_s = storage_read_bytes_per_s(obs.storage);
    return cur;
}

// Observed step time: measured directly, or from tokens/s, or -- for GPUs seen
// idling -- the predicted busy time over the utilization. 0 when nothing says.
double observed_step_s(const Scenario& s, const Observations& obs, double busy_step_s, std::vector<std::string>& assumptions) {
    if (obs.step_s) return *obs.step_s;
    if (obs.tokens_per_s && *obs.tokens_per_s > 0) return s.setup.tokens_per_step() / *obs.tokens_per_s;
    if (obs.gpu_util_pct && *obs.gpu_util_pct > 0 && *obs.gpu_util_pct < 95) {
        assumptions.push_back("step time = predicted busy time / observed utilization " + num(*obs.gpu_util_pct, 0) + " %");
        return busy_step_s / (*obs.gpu_util_pct / 100.0);
    }
    if (obs.util_swings) {
        assumptions.push_back("utilization swinging 0-100 % taken as 50 % busy");
        return busy_step_s / 0.5;
    }
    return 0;
}

// A data loader that starves the GPUs: the per-worker rate that explains the
// observed step (the loader prefetches, so the step is the loader's time).
void infer_loader_rate(Scenario& cur, const Observations& obs, double observed_step, double model_step,
                       std::vector<std::string>& assumptions) {
    if (!(observed_step > model_step * 1.1) || !obs.gpus_idle() || cur.run.loader_workers <= 0 || cur.run.worker_samples_per_s > 0)
        return;
    const double samples = static_cast<double>(cur.setup.micro_batch * cur.setup.grad_accum);
    cur.run.worker_samples_per_s = samples / (observed_step * cur.run.loader_workers);
    assumptions.push_back("each loader worker prepares " + num(cur.run.worker_samples_per_s, 2) +
                          " samples/s (what the observed step implies)");
}

// ---- 2. the remedy catalogue: each entry is a move applied to the scenario as it runs

struct Candidate {
    Advice advice;  // title, assumption, changes_result, extra_gpus, hardware_change, changes
    Scenario scenario;
    bool hardware = false;
    std::vector<Bottleneck> addresses;  // the bottlenecks this remedy acts on
};

struct Catalogue {
    const Scenario& cur;
    std::vector<Candidate> out;
    std::vector<Bottleneck> next;  // what the entries added next address

    void addresses(std::initializer_list<Bottleneck> b) { next.assign(b); }

    // Applies `move` to a copy; keeps it when it changed something.
    template <class Move>
    void add(std::string title, std::string assumption, bool changes_result, Move move) {
        Candidate c{{}, cur, false, {}};
        Changes ch;
        if (!move(c.scenario, ch, c.advice)) return;
        c.advice.title = std::move(title);
        c.advice.assumption = std::move(assumption);
        c.advice.changes_result = c.advice.changes_result || changes_result;
        c.advice.changes = std::move(ch.lines);
        c.hardware = !c.advice.hardware_change.empty();
        c.addresses = next;
        out.push_back(std::move(c));
    }
};

// Full recompute when activations are what still overflows.
void recompute_if_needed(Scenario& x, Changes& ch) {
    if (!estimate_memory(x).peak().fits()) set_recompute(x, Recompute::Full, ch);
}

void same_hardware_remedies(Catalogue& c) {
    const TrainingSetup& t = c.cur.setup;
    using B = Bottleneck;
    c.addresses({B::Compute, B::Memory, B::MemoryBandwidth});
    if (t.precision == Precision::FP32)
        c.add("bf16 mixed precision", "bf16 autocast with fp32 master weights; same convergence in practice", false,
              [](Scenario& x, Changes& ch, Advice&) { return set_precision(x, Precision::BF16Mixed, ch); });
    c.addresses({B::Memory, B::MemoryBandwidth, B::Compute});
    if (t.precision != Precision::FP32)
        c.add("FlashAttention", "exact attention; needs fp16/bf16", false,
              [](Scenario& x, Changes& ch, Advice&) { return set_flash_attention(x, ch); });
    c.addresses({B::Memory});
    if (!fused_linear_ce_on(t) && fused_linear_ce_runs(t))
        c.add("Liger fused linear cross-entropy", "the head and loss in token chunks: the logits are never whole", false,
              [](Scenario& x, Changes& ch, Advice&) { return set_fused_linear_ce(x, ch); });
    if (fp32_stream(t))
        c.add("4-bit model prepared without the fp32 upcast",
              "norms, embeddings, head and adapters stay 16-bit: no fp32 stream between the matmuls, no input casts before them", false,
              [](Scenario& x, Changes& ch, Advice&) { return unset_kbit_upcast(x, ch); });
    c.addresses({B::Memory, B::Communication});
    if (runs_torch_ddp(t) && !t.ddp_bucket_view)
        c.add("DDP gradient_as_bucket_view=True", "gradients become views into the all-reduce buckets: no bucket copy", false,
              [](Scenario& x, Changes& ch, Advice&) { return set_ddp_bucket_view(x, ch); });
    c.addresses({B::Memory});
    if (t.method == Method::Full)
        c.add("optimizer step in backward", "each gradient stepped and freed as backward makes it (torchtune optimizer_in_bwd): no gradient accumulation, no global-norm clipping", false,
              [](Scenario& x, Changes& ch, Advice&) { return set_optimizer_in_backward(x, ch); });
    c.addresses({B::Communication, B::Memory});
    c.add("DeepSpeed overlap_comm", "ZeRO-1/2 reduce the gradient buckets on their own stream under backward; two reduce buckets resident", false,
          [](Scenario& x, Changes& ch, Advice&) { return set_ds_overlap_comm(x, ch); });
    c.addresses({B::Communication, B::Memory});
    if (t.ds_reduce_per_rank)
        c.add("DeepSpeed v0.12.4 or later, overlap_comm on",
              "one all-reduce per gradient bucket with no device synchronize per rank (PR #4695): the reduction overlaps backward; two reduce buckets resident",
              false, [](Scenario& x, Changes& ch, Advice&) { return upgrade_ds_reduce(x, ch); });
    c.addresses({B::Memory, B::Communication});
    if (runs_deepspeed_zero3(t))
        c.add("DeepSpeed sub_group_size=1e8", "the step copies the gradients to fp32 1e8 elements at a time", false,
              [](Scenario& x, Changes& ch, Advice&) { return shrink_ds_sub_group(x, ch); });
    c.addresses({B::Compute});
    if (runs_deepspeed_zero3(t))
        c.add("DeepSpeed ZeRO-2 instead of ZeRO-3", "no per-module fetch/release hooks on the host; the 16-bit weights whole on each rank", false,
              [](Scenario& x, Changes& ch, Advice&) { return leave_zero3(x, ch); });
    c.addresses({B::Memory});
    if (t.nccl != NcclRelease::NvlsOff && c.cur.cluster.intra_node.nvls)
        c.add("NCCL_NVLS_ENABLE=0", "no NVLink SHARP buffers; all-reduce as rings instead of in the switch", false,
              [](Scenario& x, Changes& ch, Advice&) { return disable_nvls(x, ch); });
    c.addresses({B::Memory, B::Compute});
    for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
        c.add(std::string(r == Recompute::None ? "no" : to_string(r)) + " activation recompute",
              r == Recompute::Full ? "one extra forward per step" : "fewer recomputed activations", false,
              [r](Scenario& x, Changes& ch, Advice&) { return set_recompute(x, r, ch); });
    c.addresses({B::Communication, B::Compute, B::MemoryBandwidth, B::PipelineBubble});
    c.add("larger micro-batch, same global batch", "largest micro-batch that fits and divides the per-replica batch", false,
          [](Scenario& x, Changes& ch, Advice&) { return grow_micro_batch(x, ch); });
    c.addresses({B::Communication, B::PipelineBubble});
    if (t.layout.dp > 1)
        c.add("4x gradient accumulation (larger global batch)",
              "global batch 4x larger: gradients are reduced once per 4x more tokens; may need learning-rate retuning", true,
              [](Scenario& x, Changes& ch, Advice&) { return set_grad_accum(x, x.setup.grad_accum * 4, ch); });
    c.addresses({B::Memory});
    for (int z = 1; z <= 3; ++z)
        c.add("ZeRO-" + std::to_string(z) + (z == 3 ? " / FSDP full shard" : ""),
              "sharded over the " + std::to_string(t.layout.dp) + " data-parallel ranks", false,
              [z](Scenario& x, Changes& ch, Advice&) { return set_zero(x, z, ch); });
    c.add("optimizer offload to CPU (ZeRO-Offload)", "CPU Adam at ~1e9 parameters/s per node; needs host memory for the states", false,
          [](Scenario& x, Changes& ch, Advice&) {
              if (!offload_optimizer(x, ch)) return false;
              recompute_if_needed(x, ch);
              return true;
          });
    for (Method me : {Method::LoRA, Method::QLoRA}) {
        if (me == Method::LoRA && t.method == Method::QLoRA) continue;
        c.add(me == Method::LoRA ? "LoRA (all linear layers)" : "QLoRA (NF4 base, all linear layers)",
              "adapters instead of full weights; quality close to full fine-tuning for most fine-tunes", true,
              [me](Scenario& x, Changes& ch, Advice&) {
                  if (!set_method(x, me, ch)) return false;
                  recompute_if_needed(x, ch);
                  return true;
              });
    }
    c.addresses({B::Communication, B::PipelineBubble, B::Compute, B::Memory});
    if (c.cur.cluster.num_gpus > 1)
        c.add("best layout from the search", "tp / pp / dp / micro-batch / ZeRO / recompute chosen by `trainplan plan` on the same GPUs",
              false, [](Scenario& x, Changes& ch, Advice&) {
                  const PlanResult r = plan_layouts(x, SearchSpace{}, 1, RankBy::Throughput, 1, x.setup.global_batch());
                  if (r.top.empty()) return false;
                  ch.lines = diff_settings(x, r.top.front().scenario);
                  if (ch.lines.empty()) return false;  // the layout already is the best
                  x = r.top.front().scenario;
                  return true;
              });
    c.addresses({B::DataPipeline});
    if (c.cur.run.loader_workers > 0 && c.cur.run.worker_samples_per_s > 0)
        c.add("4x the data-loader workers", "workers scale linearly (enough CPU cores); pre-tokenizing the data removes the cost entirely",
              false, [](Scenario& x, Changes& ch, Advice&) {
                  ch.note("loader_workers", std::to_string(x.run.loader_workers), std::to_string(x.run.loader_workers * 4));
                  x.run.loader_workers *= 4;
                  return true;
              });
    c.addresses({B::Thermal});
    if (c.cur.run.sustained_clock < 0.99)
        c.add("better cooling / power limits",
              "restores the clock the GEMM rate assumes (airflow, fan curve, or a power cap that keeps the card below its thermal target)", false,
              [](Scenario& x, Changes& ch, Advice&) {
                  ch.note("sustained_clock", num(100 * x.run.sustained_clock, 0) + " %", "100 % of " + x.cluster.gpu.reference_clock_name());
                  x.run.sustained_clock = 1.0;
                  return true;
              });
}

void hardware_remedies(Catalogue& c, const AdviceContext& ctx) {
    using B = Bottleneck;
    const ClusterSpec& cl = c.cur.cluster;
    c.addresses({B::DataPipeline});
    if (c.cur.run.storage_bytes_per_s > 0 && c.cur.run.storage_bytes_per_s < storage_read_bytes_per_s(Storage::NVMe))
        c.add("local NVMe storage", "~5 GB/s sequential reads per node", false, [](Scenario& x, Changes& ch, Advice& a) {
            ch.note("storage", num(x.run.storage_bytes_per_s / 1e9) + " GB/s", "local NVMe");
            a.hardware_change = "NVMe drive";
            x.run.storage_bytes_per_s = storage_read_bytes_per_s(Storage::NVMe);
            return true;
        });
    c.addresses({B::Communication});
    for (const LinkSpec& l : ctx.intra_links) {
        if (cl.num_gpus < 2 || l.id == cl.intra_node.id || l.bandwidth_Bps <= cl.intra_node.bandwidth_Bps) continue;
        c.add("GPU-to-GPU link: " + l.name, "same GPUs joined by " + l.name, false, [l](Scenario& x, Changes& ch, Advice& a) {
            ch.note("intra_node", x.cluster.intra_node.id, l.id);
            a.hardware_change = l.name;
            x.cluster.intra_node = l;
            return true;
        });
    }
    for (const LinkSpec& l : ctx.inter_links) {
        if (cl.num_nodes() < 2 || l.id == cl.inter_node.id || l.bandwidth_Bps <= cl.inter_node.bandwidth_Bps) continue;
        c.add("node-to-node fabric: " + l.name, "one port per GPU", false, [l](Scenario& x, Changes& ch, Advice& a) {
            ch.note("inter_node", x.cluster.inter_node.id, l.id, ", one NIC per GPU");
            a.hardware_change = l.name;
            x.cluster.inter_node = l;
            x.cluster.nics_per_node = x.cluster.gpus_per_node;
            return true;
        });
    }
    c.addresses({B::Compute, B::MemoryBandwidth, B::Memory, B::Communication});
    for (const auto& [g, link] : ctx.gpus) {
        if (g.id == cl.gpu.id) continue;
        // A new card runs at its own clocks: the throttle seen on this one is not carried over.
        c.add("different GPU: " + g.name, "same GPU count and layout on " + g.name + " joined by " + link.name + ", at its boost clock",
              false, [g = g, link = link](Scenario& x, Changes& ch, Advice& a) {
                  ch.note("gpu", x.cluster.gpu.id, g.id, " (" + link.id + ")");
                  a.hardware_change = g.name;
                  x.cluster.gpu = g;
                  if (x.cluster.num_gpus > 1) x.cluster.intra_node = link;
                  if (x.setup.precision == Precision::FP8Mixed && g.fp8_flops <= 0) set_precision(x, Precision::BF16Mixed, ch);
                  if ((x.setup.precision == Precision::BF16Mixed || x.setup.precision == Precision::BF16) && !g.has_bf16_tensor_cores())
                      set_precision(x, Precision::FP16Mixed, ch);
                  x.run.sustained_clock = 1.0;
                  return true;
              });
    }
    c.addresses({B::Compute, B::MemoryBandwidth});
    c.add("2x the GPUs (data parallel)", "same global batch over twice the data-parallel ranks", false,
          [&ctx](Scenario& x, Changes& ch, Advice& a) {
              const int n = x.cluster.num_gpus;
              if (!set_data_parallel(x, 2 * n, ch)) return false;
              // Past one node the gradients cross the fabric: time it on the GPU's
              // default one (the resolver's choice), never on a missing link.
              if (x.cluster.num_nodes() > 1 && x.cluster.inter_node.id.empty()) {
                  if (ctx.fabric.id.empty()) return false;
                  x.cluster.inter_node = ctx.fabric;
                  ch.note("inter_node", "none", ctx.fabric.id);
              }
              a.extra_gpus = n;
              a.hardware_change = std::to_string(n) + (n == 1 ? " more GPU" : " more GPUs");
              return true;
          });
}

// ---- 3. keep what helps, ranked by effect

// `oom_bytes` > 0: the run was seen running out of memory at this model
// estimate, so a remedy must need less.
std::vector<Advice> evaluate(std::vector<Candidate> cands, Bottleneck diagnosed, bool starved_unquantified, bool base_fits,
                             double oom_bytes, double base_tps, int max_remedies) {
    std::vector<Advice> groups[4];  // on the diagnosed bottleneck: same hardware, hardware; then the others
    for (Candidate& c : cands) {
        if (!validate(c.scenario).empty()) continue;  // the rules pre-check every remedy
        Advice& a = c.advice;
        a.memory = estimate_memory(c.scenario).peak();
        if (!a.memory.fits() || (oom_bytes > 0 && a.memory.total >= oom_bytes)) continue;
        a.time = estimate_time(c.scenario);
        a.speedup = base_tps > 0 ? a.time.throughput.tokens_per_s / base_tps : 0;
        a.fixes_memory = !base_fits;
        // Helps: makes it fit, or is at least 2 % faster.
        if (base_fits && a.speedup < 1.02) continue;
        a.scenario = std::move(c.scenario);
        const bool on_target = std::find(c.addresses.begin(), c.addresses.end(), diagnosed) != c.addresses.end();
        // GPUs starved by an input pipeline the model cannot quantify gain nothing
        // from faster compute: only what acts on the pipeline helps.
        if (starved_unquantified && !on_target) continue;
        groups[(on_target ? 0 : 2) + (c.hardware ? 1 : 0)].push_back(std::move(a));
    }
    // Remedies for the diagnosed bottleneck first; within that, what the same
    // hardware can do before what money buys; each group by effect.
    auto by_effect = [](const Advice& a, const Advice& b) { return a.time.throughput.tokens_per_s > b.time.throughput.tokens_per_s; };
    std::vector<Advice> out;
    for (auto& g : groups) {
        std::stable_sort(g.begin(), g.end(), by_effect);
        for (auto& a : g) out.push_back(std::move(a));
    }
    if (static_cast<int>(out.size()) > max_remedies) out.resize(static_cast<size_t>(max_remedies));
    return out;
}

}  // namespace

AdviceReport advise(const Scenario& s, const Observations& obs, const AdviceContext& ctx, int max_remedies) {
    AdviceReport rep;
    std::vector<std::string> assumptions;
    Scenario cur = as_it_runs(s, obs, assumptions);
    const double model_step = estimate_time(cur).time.step_s;
    const double observed_step = observed_step_s(s, obs, model_step, assumptions);
    infer_loader_rate(cur, obs, observed_step, model_step, assumptions);

    rep.time = estimate_time(cur);
    rep.memory = estimate_memory(cur).peak();
    if (observed_step > 0) rep.observed_tokens_per_s = s.setup.tokens_per_step() / observed_step;
    rep.diagnosis = diagnose(cur, rep.memory, rep.time, obs, estimate_time(s).throughput.tokens_per_s, rep.observed_tokens_per_s);
    for (const auto& a : assumptions) rep.diagnosis.evidence.push_back("assumed: " + a);

    Catalogue cat{cur, {}, {}};
    same_hardware_remedies(cat);
    hardware_remedies(cat, ctx);
    const bool starved_unquantified =
        rep.diagnosis.bottleneck == Bottleneck::DataPipeline && !(rep.time.time.data_s > BottleneckThresholds::kDataStall * rep.time.time.step_s);
    rep.remedies = evaluate(std::move(cat.out), rep.diagnosis.bottleneck, starved_unquantified, rep.memory.fits() && !obs.oom, obs.oom ? rep.memory.total : 0,
                           rep.time.throughput.tokens_per_s, max_remedies);
    return rep;
}

}  // namespace trainplan
