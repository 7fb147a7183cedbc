#include "trainplan/advisor.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "trainplan/search.hpp"
#include "trainplan/units.hpp"

namespace trainplan {

const char* to_string(Storage s) {
    switch (s) {
        case Storage::Unknown: return "unknown";
        case Storage::HDD: return "hdd";
        case Storage::SataSSD: return "sata-ssd";
        case Storage::NVMe: return "nvme";
        case Storage::Network: return "network";
    }
    return "?";
}

double storage_read_bytes_per_s(Storage s) {
    // Sequential read per node, typical figures (estimates): a 7200 rpm disk
    // ~0.2 GB/s, a SATA SSD ~0.55 GB/s (the SATA III 6 Gb/s limit), a PCIe 4.0
    // NVMe drive ~5 GB/s, a shared network file system ~1 GB/s per client.
    switch (s) {
        case Storage::HDD: return 0.2e9;
        case Storage::SataSSD: return 0.55e9;
        case Storage::NVMe: return 5e9;
        case Storage::Network: return 1e9;
        case Storage::Unknown: break;
    }
    return 0;
}

const char* to_string(Bottleneck b) {
    switch (b) {
        case Bottleneck::Memory: return "memory";
        case Bottleneck::Compute: return "compute";
        case Bottleneck::MemoryBandwidth: return "memory bandwidth";
        case Bottleneck::Communication: return "communication";
        case Bottleneck::PipelineBubble: return "pipeline bubble";
        case Bottleneck::DataPipeline: return "data pipeline";
        case Bottleneck::Thermal: return "thermal";
        case Bottleneck::Offload: return "offload";
    }
    return "?";
}

namespace {

std::string pct(double v) {
    std::ostringstream o;
    o.setf(std::ios::fixed);
    o.precision(0);
    o << 100 * v << " %";
    return o.str();
}
std::string num(double v, int prec = 2) {
    std::ostringstream o;
    o.setf(std::ios::fixed);
    o.precision(prec);
    o << v;
    return o.str();
}
std::string gbs(double bytes) { return num(bytes / units::GB, 2) + " GB"; }

double tokens_per_step(const Scenario& s) {
    return static_cast<double>(s.setup.global_batch()) * static_cast<double>(s.setup.seq_len);
}

}  // namespace

AdviceReport advise(const Scenario& s, const Observations& obs, const AdviceContext& ctx, int max_remedies) {
    AdviceReport rep;
    Scenario cur = s;  // the scenario as it runs: observed mechanisms applied
    std::vector<std::string> assumptions;

    // ---- observations that are mechanisms of the model
    if (obs.sm_clock_mhz && s.cluster.gpu.boost_clock_mhz > 0) {
        cur.run.sustained_clock = std::clamp(*obs.sm_clock_mhz / s.cluster.gpu.boost_clock_mhz, 0.05, 1.0);
    } else if (obs.gpu_temp_c && *obs.gpu_temp_c >= 83) {
        // NVIDIA GPUs hold boost clocks up to their temperature target (83 C on
        // GeForce) and shed clock above it (seed 000: throttling at 83-90 C). Without a
        // measured clock we assume 15 % below boost.
        cur.run.sustained_clock = 0.85;
        assumptions.push_back("clock 15 % below boost at " + num(*obs.gpu_temp_c, 0) + " C (no clock reading given)");
    }
    if (obs.loader_workers) cur.run.loader_workers = *obs.loader_workers;
    if (obs.storage != Storage::Unknown && cur.run.storage_bytes_per_s <= 0) cur.run.storage_bytes_per_s = storage_read_bytes_per_s(obs.storage);

    const TimeEstimate model = estimate_time(cur);
    // Observed throughput: measured directly, or from the step time, or -- for a
    // GPU whose utilization swings -- the busy time over the utilization.
    double observed_step = 0;
    if (obs.step_s) observed_step = *obs.step_s;
    else if (obs.tokens_per_s && *obs.tokens_per_s > 0) observed_step = tokens_per_step(s) / *obs.tokens_per_s;
    else if (obs.gpu_util_pct && *obs.gpu_util_pct > 0 && *obs.gpu_util_pct < 95) {
        observed_step = model.time.step_s / (*obs.gpu_util_pct / 100.0);
        assumptions.push_back("step time = predicted busy time / observed utilization " + num(*obs.gpu_util_pct, 0) + " %");
    } else if (obs.util_swings) {
        observed_step = model.time.step_s / 0.5;
        assumptions.push_back("utilization swinging 0-100 % taken as 50 % busy");
    }
    // A data loader that starves the GPUs: infer the per-worker rate that explains
    // the observed step (the loader prefetches, so the step is the loader's time).
    const bool data_symptom = obs.util_swings || (obs.gpu_util_pct && *obs.gpu_util_pct < 80);
    if (observed_step > model.time.step_s * 1.1 && data_symptom && cur.run.loader_workers > 0 && cur.run.worker_samples_per_s <= 0) {
        const double samples = static_cast<double>(cur.setup.micro_batch * cur.setup.grad_accum);
        cur.run.worker_samples_per_s = samples / (observed_step * cur.run.loader_workers);
        assumptions.push_back("each loader worker prepares " + num(cur.run.worker_samples_per_s, 2) +
                              " samples/s (what the observed step implies)");
    }
    rep.time = estimate_time(cur);
    rep.memory = estimate_memory(cur).peak();
    if (observed_step > 0) rep.observed_tokens_per_s = tokens_per_step(s) / observed_step;
    const double base_tps = rep.observed_tokens_per_s > 0 ? rep.observed_tokens_per_s : rep.time.throughput.tokens_per_s;

    // ---- diagnosis
    Diagnosis& d = rep.diagnosis;
    const TimeBreakdown& t = rep.time.time;
    const MemoryBreakdown& m = rep.memory;
    const double step = t.step_s;
    auto evidence = [&](std::string e) { d.evidence.push_back(std::move(e)); };
    evidence("memory per GPU " + gbs(m.total) + " of " + gbs(m.capacity) + " (weights " + gbs(m.weights) + ", gradients " +
             gbs(m.gradients) + ", optimizer " + gbs(m.optimizer) + ", activations " + gbs(m.activations) + ", logits " + gbs(m.logits) + ")");
    evidence("step " + num(step, 3) + " s: compute " + pct(t.compute_s / step) + " (memory-bound ops " +
             pct(t.compute_s > 0 ? t.memory_bound_s / t.compute_s : 0) + " of it), communication " + pct(t.communication_s / step) +
             ", bubble " + pct(t.bubble_s / step) + ", optimizer " + pct(t.optimizer_s / step) + ", offload " + pct(t.offload_s / step) +
             ", data stall " + pct(t.data_s / step));
    evidence("MFU " + pct(rep.time.throughput.mfu) + ", " + num(rep.time.throughput.tokens_per_s, 0) + " tokens/s predicted");

    const bool tensor_cores = cur.cluster.gpu.bf16_flops > 2 * cur.cluster.gpu.fp32_flops || cur.cluster.gpu.fp16_flops > 2 * cur.cluster.gpu.fp32_flops;
    if (!m.fits() || obs.oom || m.headroom() < 0.03 * m.capacity) {
        d.bottleneck = Bottleneck::Memory;
        d.headline = !m.fits() ? "Does not fit: needs " + gbs(m.total) + " per GPU, " + num(m.total / m.capacity, 1) + "x the " +
                                     gbs(m.capacity) + " available."
                               : "Memory is the limit: " + gbs(m.headroom()) + " of headroom" +
                                     (obs.oom ? " and an out-of-memory was observed (fragmentation or a peak the model does not see)." : ".");
    } else if (t.thermal_s > 0.08 * step) {
        d.bottleneck = Bottleneck::Thermal;
        d.headline = "Thermal or power throttling: the sustained clock (" + pct(cur.run.sustained_clock) + " of boost) adds " +
                     num(t.thermal_s, 3) + " s (" + pct(t.thermal_s / step) + ") to each step.";
    } else if (t.data_s > 0.1 * step) {
        d.bottleneck = Bottleneck::DataPipeline;
        d.headline = "The data pipeline starves the GPUs: " + std::to_string(cur.run.loader_workers) + " loader workers deliver too few samples; " +
                     num(t.data_s, 3) + " s (" + pct(t.data_s / step) + ") of each step the GPUs wait.";
    } else if (t.offload_s > 0.25 * step) {
        d.bottleneck = Bottleneck::Offload;
        d.headline = "Offloading dominates: the CPU optimizer and PCIe transfers take " + pct(t.offload_s / step) + " of the step.";
    } else if (t.communication_s > 0.2 * step) {
        d.bottleneck = Bottleneck::Communication;
        struct Part { const char* name; double s; std::string link; };
        const Part parts[] = {{"data-parallel gradient reduction", t.dp_exposed_s, rep.time.placement.dp_link},
                              {"tensor-parallel all-reduce", t.tp_comm_s, rep.time.placement.tp_link},
                              {"pipeline send/receive", t.pp_comm_s, rep.time.placement.pp_link},
                              {"expert all-to-all", t.ep_comm_s, rep.time.placement.ep_link}};
        const Part* worst = &parts[0];
        for (const Part& p : parts) if (p.s > worst->s) worst = &p;
        d.headline = std::string("Communication-bound: the ") + worst->name + " over " + worst->link + " leaves " +
                     num(worst->s, 3) + " s (" + pct(worst->s / step) + ") of each step exposed.";
    } else if (t.bubble_s > 0.15 * step) {
        d.bottleneck = Bottleneck::PipelineBubble;
        d.headline = "Pipeline bubble: " + pct(t.bubble_s / step) + " of the step is idle pipeline stages ((p-1)/(m v) with m = " +
                     std::to_string(cur.setup.grad_accum) + " micro-batches).";
    } else if (cur.setup.precision == Precision::FP32 && tensor_cores) {
        d.bottleneck = Bottleneck::Compute;
        d.headline = "Compute-bound in FP32: the tensor cores sit idle (" + num(cur.cluster.gpu.fp32_flops / units::TFLOPS, 1) +
                     " TFLOP/s FP32 vs " + num(cur.cluster.gpu.peak_flops(NumericFormat::BF16) / units::TFLOPS, 1) + " bf16).";
    } else if (t.compute_s > 0 && t.memory_bound_s > 0.4 * t.compute_s) {
        d.bottleneck = Bottleneck::MemoryBandwidth;
        d.headline = "Memory-bandwidth-bound: " + pct(t.memory_bound_s / t.compute_s) + " of compute time is element-wise work limited by " +
                     num(cur.cluster.gpu.memory_bandwidth_Bps / units::GBps, 0) + " GB/s of HBM/GDDR.";
    } else {
        d.bottleneck = Bottleneck::Compute;
        d.headline = "Compute-bound at " + pct(rep.time.throughput.mfu) + " MFU" +
                     (rep.time.throughput.mfu < 0.3 ? " -- low: the GEMMs are small or the layout is wrong." : ": the GPUs are busy with useful work.");
    }
    if (rep.observed_tokens_per_s > 0) {
        const double ratio = rep.observed_tokens_per_s > 0 ? estimate_time(s).throughput.tokens_per_s / rep.observed_tokens_per_s : 1;
        std::string g = "Observed " + num(rep.observed_tokens_per_s, 0) + " tokens/s is " + num(ratio, 2) + "x below the model's " +
                        num(estimate_time(s).throughput.tokens_per_s, 0) + " tokens/s for this setup";
        if (ratio < 1.15) g = "Observed throughput matches the model within 15 %: the prediction explains the run";
        else if (data_symptom) g += "; with utilization swinging and " + std::to_string(cur.run.loader_workers) + " loader workers the gap points to the data pipeline";
        else if (cur.run.sustained_clock < 1) g += "; the lowered clock explains " + pct(1 - cur.run.sustained_clock) + " of it";
        else g += "; look for a data-loader stall, thermal throttling, CPU-side overhead or a straggler GPU";
        d.observation_gap = g + ".";
    }
    for (const auto& a : assumptions) evidence("assumed: " + a);

    // ---- remedies, each re-simulated
    // Which bottlenecks each remedy addresses (ranking puts those first).
    using B = Bottleneck;
    struct Try {
        std::string title;
        std::string assumption;
        bool changes_result = false;
        bool hardware = false;
        std::vector<Bottleneck> addresses;
        std::function<bool(Scenario&, std::vector<std::string>&, int&, std::string&)> apply;
    };
    std::vector<Try> tries;
    std::vector<Bottleneck> next_addresses;
    auto add = [&](std::string title, std::string assumption, bool changes, bool hardware,
                   std::function<bool(Scenario&, std::vector<std::string>&, int&, std::string&)> f) {
        tries.push_back({std::move(title), std::move(assumption), changes, hardware, next_addresses, std::move(f)});
    };
    auto addresses = [&](std::initializer_list<Bottleneck> b) { next_addresses.assign(b); };
    TrainingSetup& ct = cur.setup;
    addresses({B::Compute, B::Memory, B::MemoryBandwidth});
    if (ct.precision == Precision::FP32)
        add("bf16 mixed precision", "bf16 autocast with fp32 master weights; same convergence in practice", false, false,
            [](Scenario& x, auto& ch, int&, std::string&) { x.setup.precision = Precision::BF16Mixed; ch.push_back("precision: fp32 -> bf16-mixed"); return true; });
    addresses({B::Memory, B::MemoryBandwidth, B::Compute});
    if (!ct.flash_attention && ct.precision != Precision::FP32)
        add("FlashAttention", "exact attention; needs fp16/bf16", false, false,
            [](Scenario& x, auto& ch, int&, std::string&) { x.setup.flash_attention = true; ch.push_back("flash_attention: off -> on"); return true; });
    addresses({B::Memory, B::Compute});
    for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
        if (r == ct.recompute) continue;
        add(std::string(r == Recompute::None ? "no" : to_string(r)) + " activation recompute",
            r == Recompute::Full ? "one extra forward per step" : "fewer recomputed activations", false, false,
            [r](Scenario& x, auto& ch, int&, std::string&) {
                ch.push_back(std::string("recompute: ") + to_string(x.setup.recompute) + " -> " + to_string(r));
                x.setup.recompute = r;
                return true;
            });
    }
    addresses({B::Communication, B::Compute, B::MemoryBandwidth, B::PipelineBubble});
    add("larger micro-batch, same global batch", "largest micro-batch that fits and divides the per-replica batch", false, false,
        [](Scenario& x, auto& ch, int&, std::string&) {
            const std::int64_t per_replica = x.setup.micro_batch * x.setup.grad_accum;
            const std::int64_t cap = max_micro_batch(x, per_replica);
            std::int64_t mb = x.setup.micro_batch;
            for (std::int64_t c = cap; c > x.setup.micro_batch; --c)
                if (per_replica % c == 0) { mb = c; break; }
            if (mb == x.setup.micro_batch) return false;
            ch.push_back("micro_batch: " + std::to_string(x.setup.micro_batch) + " -> " + std::to_string(mb) + ", grad_accum " +
                         std::to_string(x.setup.grad_accum) + " -> " + std::to_string(per_replica / mb));
            x.setup.grad_accum = per_replica / mb;
            x.setup.micro_batch = mb;
            return true;
        });
    addresses({B::Communication, B::PipelineBubble});
    if (ct.layout.dp > 1)
        add("4x gradient accumulation (larger global batch)", "global batch 4x larger: gradients are reduced once per 4x more tokens; may need learning-rate retuning",
            true, false, [](Scenario& x, auto& ch, int&, std::string&) {
                ch.push_back("grad_accum: " + std::to_string(x.setup.grad_accum) + " -> " + std::to_string(x.setup.grad_accum * 4) +
                             " (global batch " + std::to_string(x.setup.global_batch()) + " -> " + std::to_string(x.setup.global_batch() * 4) + ")");
                x.setup.grad_accum *= 4;
                return true;
            });
    addresses({B::Memory});
    for (int z = 1; z <= 3; ++z) {
        if (ct.layout.dp <= 1 || z == ct.zero_stage || (z >= 2 && ct.layout.pp > 1)) continue;
        add("ZeRO-" + std::to_string(z) + (z == 3 ? " / FSDP full shard" : ""), "sharded over the " + std::to_string(ct.layout.dp) + " data-parallel ranks",
            false, false, [z](Scenario& x, auto& ch, int&, std::string&) {
                ch.push_back("zero: " + std::to_string(x.setup.zero_stage) + " -> " + std::to_string(z));
                x.setup.zero_stage = z;
                return true;
            });
    }
    addresses({B::Memory});
    if (ct.optimizer_offload == Offload::None)
        add("ZeRO-3 + optimizer offload to CPU", "CPU Adam at ~1e9 parameters/s per node; needs host memory for the states", false, false,
            [](Scenario& x, auto& ch, int&, std::string&) {
                if (x.setup.layout.pp > 1) return false;
                ch.push_back("zero: " + std::to_string(x.setup.zero_stage) + " -> 3");
                ch.push_back("optimizer_offload: none -> cpu");
                x.setup.zero_stage = 3;
                x.setup.optimizer_offload = Offload::CPU;
                // Recompute if activations are what overflows.
                if (!estimate_memory(x).peak().fits() && x.setup.recompute != Recompute::Full) {
                    ch.push_back(std::string("recompute: ") + to_string(x.setup.recompute) + " -> full");
                    x.setup.recompute = Recompute::Full;
                }
                return true;
            });
    addresses({B::Memory});
    for (Method me : {Method::LoRA, Method::QLoRA}) {
        if (ct.method == me || (me == Method::LoRA && ct.method == Method::QLoRA)) continue;
        add(me == Method::LoRA ? "LoRA (rank 16, all linear layers)" : "QLoRA (NF4 base, rank 16, all linear layers)",
            "adapters instead of full weights; quality close to full fine-tuning for most fine-tunes", true, false,
            [me](Scenario& x, auto& ch, int&, std::string&) {
                ch.push_back(std::string("method: ") + to_string(x.setup.method) + " -> " + to_string(me));
                x.setup.method = me;
                x.setup.lora.targets = kLoraAll;
                if (me == Method::QLoRA) {
                    if (x.setup.precision != Precision::BF16) ch.push_back(std::string("precision: ") + to_string(x.setup.precision) + " -> bf16");
                    x.setup.precision = Precision::BF16;
                    x.setup.recompute = Recompute::Full;
                }
                if (!estimate_memory(x).peak().fits() && x.setup.recompute != Recompute::Full) {
                    ch.push_back(std::string("recompute: ") + to_string(x.setup.recompute) + " -> full");
                    x.setup.recompute = Recompute::Full;
                }
                return true;
            });
    }
    addresses({B::Communication, B::PipelineBubble, B::Compute, B::Memory});
    if (cur.cluster.num_gpus > 1)
        add("best layout from the search", "tp / pp / dp / micro-batch / ZeRO / recompute chosen by `trainplan plan` on the same GPUs", false, false,
            [](Scenario& x, auto& ch, int&, std::string&) {
                const PlanResult r = plan_layouts(x, SearchSpace{}, 1, RankBy::Throughput, 1, x.setup.global_batch());
                if (r.top.empty()) return false;
                const TrainingSetup& b = r.top.front().scenario.setup;
                const TrainingSetup& a = x.setup;
                if (b.layout.tp == a.layout.tp && b.layout.pp == a.layout.pp && b.micro_batch == a.micro_batch && b.zero_stage == a.zero_stage &&
                    b.recompute == a.recompute && b.layout.vp == a.layout.vp && b.optimizer_offload == a.optimizer_offload)
                    return false;
                ch.push_back("layout: tp " + std::to_string(a.layout.tp) + " pp " + std::to_string(a.layout.pp) + " dp " + std::to_string(a.layout.dp) +
                             " -> tp " + std::to_string(b.layout.tp) + " pp " + std::to_string(b.layout.pp) + " dp " + std::to_string(b.layout.dp) +
                             (b.layout.vp > 1 ? " v" + std::to_string(b.layout.vp) : "") + (b.layout.sequence_parallel ? " sp" : ""));
                ch.push_back("micro_batch " + std::to_string(b.micro_batch) + " x " + std::to_string(b.grad_accum) + ", ZeRO-" +
                             std::to_string(b.zero_stage) + ", recompute " + to_string(b.recompute));
                x = r.top.front().scenario;
                return true;
            });
    addresses({B::DataPipeline});
    if (cur.run.loader_workers > 0 && cur.run.worker_samples_per_s > 0)
        add("4x the data-loader workers", "workers scale linearly (enough CPU cores); pre-tokenizing the data removes the cost entirely", false, false,
            [](Scenario& x, auto& ch, int&, std::string&) {
                ch.push_back("loader workers: " + std::to_string(x.run.loader_workers) + " -> " + std::to_string(x.run.loader_workers * 4));
                x.run.loader_workers *= 4;
                return true;
            });
    addresses({B::DataPipeline});
    if (cur.run.storage_bytes_per_s > 0 && cur.run.storage_bytes_per_s < storage_read_bytes_per_s(Storage::NVMe))
        add("local NVMe storage", "~5 GB/s sequential reads per node", false, true, [](Scenario& x, auto& ch, int&, std::string& hw) {
            ch.push_back("storage: -> local NVMe");
            hw = "NVMe drive";
            x.run.storage_bytes_per_s = storage_read_bytes_per_s(Storage::NVMe);
            return true;
        });
    addresses({B::Thermal});
    if (cur.run.sustained_clock < 0.99)
        add("better cooling / power limits", "restores the boost clock (airflow, fan curve, or a power cap that keeps the card below its thermal target)",
            false, false, [](Scenario& x, auto& ch, int&, std::string& hw) {
                ch.push_back("sustained clock: " + num(100 * x.run.sustained_clock, 0) + " % -> 100 % of boost");
                (void)hw;
                x.run.sustained_clock = 1.0;
                return true;
            });
    addresses({B::Communication});
    for (const LinkSpec& l : ctx.intra_links) {
        if (cur.cluster.num_gpus < 2 || l.id == cur.cluster.intra_node.id || l.bandwidth_Bps <= cur.cluster.intra_node.bandwidth_Bps) continue;
        add("GPU-to-GPU link: " + l.name, "same GPUs joined by " + l.name, false, true, [l](Scenario& x, auto& ch, int&, std::string& hw) {
            ch.push_back("intra-node link: " + x.cluster.intra_node.id + " -> " + l.id);
            hw = l.name;
            x.cluster.intra_node = l;
            return true;
        });
    }
    for (const LinkSpec& l : ctx.inter_links) {
        if (cur.cluster.num_nodes() < 2 || l.id == cur.cluster.inter_node.id || l.bandwidth_Bps <= cur.cluster.inter_node.bandwidth_Bps) continue;
        add("node-to-node fabric: " + l.name, "one port per GPU", false, true, [l](Scenario& x, auto& ch, int&, std::string& hw) {
            ch.push_back("inter-node link: " + x.cluster.inter_node.id + " -> " + l.id + ", one NIC per GPU");
            hw = l.name;
            x.cluster.inter_node = l;
            x.cluster.nics_per_node = x.cluster.gpus_per_node;
            return true;
        });
    }
    addresses({B::Compute, B::MemoryBandwidth, B::Memory, B::Communication});
    for (const auto& [g, link] : ctx.gpus) {
        if (g.id == cur.cluster.gpu.id) continue;
        add("different GPU: " + g.name, "same GPU count and layout on " + g.name + " joined by " + link.name, false, true,
            [g = g, link = link](Scenario& x, auto& ch, int&, std::string& hw) {
                ch.push_back("gpu: " + x.cluster.gpu.id + " -> " + g.id + " (" + link.id + ")");
                hw = g.name;
                x.cluster.gpu = g;
                if (x.cluster.num_gpus > 1) x.cluster.intra_node = link;
                if (x.setup.precision == Precision::FP8Mixed && g.fp8_flops <= 0) x.setup.precision = Precision::BF16Mixed;
                return true;
            });
    }
    addresses({B::Compute, B::MemoryBandwidth});
    add("2x the GPUs (data parallel)", "same global batch over twice the data-parallel ranks", false, true,
        [](Scenario& x, auto& ch, int& extra, std::string& hw) {
            const std::int64_t gb = x.setup.global_batch();
            const int dp2 = x.setup.layout.dp * 2;
            if (gb % (x.setup.micro_batch * dp2) != 0) return false;
            ch.push_back("gpus: " + std::to_string(x.cluster.num_gpus) + " -> " + std::to_string(x.cluster.num_gpus * 2) + " (dp " +
                         std::to_string(x.setup.layout.dp) + " -> " + std::to_string(dp2) + ")");
            extra = x.cluster.num_gpus;
            hw = std::to_string(x.cluster.num_gpus) + " more GPUs";
            x.cluster.num_gpus *= 2;
            x.setup.layout.dp = dp2;
            x.setup.grad_accum = gb / (x.setup.micro_batch * dp2);
            return true;
        });

    std::vector<Advice> groups[4];  // on target + same hardware, on target + hardware, other same, other hardware
    for (const Try& tr : tries) {
        Scenario x = cur;
        Advice a;
        a.title = tr.title;
        a.assumption = tr.assumption;
        a.changes_result = tr.changes_result;
        if (!tr.apply(x, a.changes, a.extra_gpus, a.hardware_change)) continue;
        if (!validate(x).empty()) continue;
        a.memory = estimate_memory(x).peak();
        if (!a.memory.fits()) continue;
        a.time = estimate_time(x);
        a.speedup = a.time.throughput.tokens_per_s / base_tps;
        // Not a remedy when it neither fixes memory nor speeds up by 2 %.
        if (m.fits() && !obs.oom && a.speedup < 1.02) continue;
        a.scenario = std::move(x);
        const bool on_target = std::find(tr.addresses.begin(), tr.addresses.end(), d.bottleneck) != tr.addresses.end();
        groups[(on_target ? 0 : 2) + (tr.hardware ? 1 : 0)].push_back(std::move(a));
    }
    // Remedies for the diagnosed bottleneck first; within that, what the same
    // hardware can do before what money buys; each group by effect.
    auto by_speed = [](const Advice& a, const Advice& b) { return a.speedup > b.speedup; };
    for (auto& g : groups) {
        std::stable_sort(g.begin(), g.end(), by_speed);
        for (auto& a : g) rep.remedies.push_back(std::move(a));
    }
    if (static_cast<int>(rep.remedies.size()) > max_remedies) rep.remedies.resize(static_cast<size_t>(max_remedies));
    return rep;
}

}  // namespace trainplan
