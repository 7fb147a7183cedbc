#include "trainplan/diagnosis.hpp"

#include <sstream>

#include "trainplan/units.hpp"

#include "text.hpp"

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
        case Bottleneck::Memory: return "memory capacity";
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

bool Observations::gpus_idle() const {
    return util_swings || (gpu_util_pct && *gpu_util_pct < BottleneckThresholds::kIdleUtilPct);
}

namespace {

using K = BottleneckThresholds;

std::string pct(double v) { return detail::fixed(100 * v, 0) + " %"; }
std::string num(double v, int prec = 2) { return detail::fixed(v, prec); }
std::string gbs(double bytes) { return num(bytes / units::GB, 2) + " GB"; }

bool tensor_cores(const GpuSpec& g) { return g.bf16_flops > 2 * g.fp32_flops || g.fp16_flops > 2 * g.fp32_flops; }

// The time part of the classifier (what runs slowest once it fits).
Bottleneck classify_time(const Scenario& s, const TimeBreakdown& t) {
    const double step = t.step_s;
    if (!(step > 0)) return Bottleneck::Compute;
    if (t.thermal_s > K::kThermal * step) return Bottleneck::Thermal;
    if (t.data_s > K::kDataStall * step) return Bottleneck::DataPipeline;
    if (t.offload_s > K::kOffload * step) return Bottleneck::Offload;
    if (t.communication_s > K::kCommunication * step) return Bottleneck::Communication;
    if (t.bubble_s > K::kBubble * step) return Bottleneck::PipelineBubble;
    if (s.setup.precision == Precision::FP32 && tensor_cores(s.cluster.gpu)) return Bottleneck::Compute;
    if (t.compute_s > 0 && t.memory_bound_s > K::kMemoryBoundCompute * t.compute_s) return Bottleneck::MemoryBandwidth;
    return Bottleneck::Compute;
}

bool explains_idle(Bottleneck b) {
    return b == Bottleneck::DataPipeline || b == Bottleneck::Communication || b == Bottleneck::PipelineBubble ||
           b == Bottleneck::Offload;
}

std::string observed_util(const Observations& obs) {
    std::string u = obs.gpu_util_pct ? num(*obs.gpu_util_pct, 0) + " % average utilization" : "";
    if (obs.util_swings) u += std::string(u.empty() ? "" : ", ") + "utilization swinging between idle and busy";
    return u;
}

std::string headline(Bottleneck b, const Scenario& s, const MemoryBreakdown& m, const TimeEstimate& te, const Observations& obs) {
    const TimeBreakdown& t = te.time;
    const double step = t.step_s;
    switch (b) {
        case Bottleneck::Memory:
            if (!m.fits())
                return "Does not fit: needs " + gbs(m.total) + " per GPU, " + num(m.total / m.capacity, 1) + "x the " + gbs(m.capacity) +
                       " available.";
            return "Memory is the limit: " + gbs(m.headroom()) + " of headroom" +
                   (obs.oom ? " and an out-of-memory was observed (fragmentation or a peak the model does not see)." : ".");
        case Bottleneck::Thermal:
            return "Thermal or power throttling: the sustained clock (" + pct(s.run.sustained_clock) + " of " + s.cluster.gpu.reference_clock_name() + ") adds " +
                   num(t.thermal_s, 3) + " s (" + pct(t.thermal_s / step) + ") to each step.";
        case Bottleneck::DataPipeline:
            if (t.data_s > K::kDataStall * step)
                return "The data pipeline starves the GPUs: " + std::to_string(s.run.loader_workers) +
                       " loader workers deliver too few samples; " + num(t.data_s, 3) + " s (" + pct(t.data_s / step) +
                       ") of each step the GPUs wait.";
            return "The GPUs wait for input: you see " + observed_util(obs) +
                   ", the signature of a starved data loader; the model, with no loader limit given (--loader-workers, "
                   "--worker-samples-per-s, --storage), cannot quantify it.";
        case Bottleneck::Offload:
            return "Offloading dominates: the CPU optimizer and PCIe transfers take " + pct(t.offload_s / step) + " of the step.";
        case Bottleneck::Communication: {
            struct Part { const char* name; double s; std::string link; };
            const Part parts[] = {{"data-parallel gradient reduction", t.dp_exposed_s, te.placement.dp_link},
                                  {"tensor-parallel all-reduce", t.tp_comm_s, te.placement.tp_link},
                                  {"pipeline send/receive", t.pp_comm_s - t.tied_embedding_s, te.placement.pp_link},
                                  {"tied embeddings' gradient all-reduce between the first and last stages", t.tied_embedding_s,
                                   te.placement.pp_link},
                                  {"expert all-to-all", t.ep_comm_s, te.placement.ep_link},
                                  {"context-parallel K/V ring", t.cp_exposed_s, te.placement.cp_link}};
            const Part* worst = &parts[0];
            for (const Part& p : parts)
                if (p.s > worst->s) worst = &p;
            return std::string("Communication-bound: the ") + worst->name + " over " + worst->link + " leaves " + num(worst->s, 3) +
                   " s (" + pct(worst->s / step) + ") of each step exposed.";
        }
        case Bottleneck::PipelineBubble:
            return "Pipeline bubble: " + pct(t.bubble_s / step) + " of the step is idle pipeline stages ((p-1)/(m v) with m = " +
                   std::to_string(s.setup.grad_accum) + " micro-batches).";
        case Bottleneck::MemoryBandwidth:
            return "Memory-bandwidth-bound: " + pct(t.memory_bound_s / t.compute_s) +
                   " of compute time is element-wise work limited by " +
                   num(s.cluster.gpu.memory_bandwidth_Bps / units::GBps, 0) + " GB/s of HBM/GDDR.";
        case Bottleneck::Compute:
            if (s.setup.precision == Precision::FP32 && tensor_cores(s.cluster.gpu))
                return "Compute-bound in FP32: the tensor cores sit idle (" + num(s.cluster.gpu.fp32_flops / units::TFLOPS, 1) +
                       " TFLOP/s FP32 vs " + num(s.cluster.gpu.peak_flops(NumericFormat::BF16) / units::TFLOPS, 1) + " bf16).";
            // The GPU idles while the host issues the step (time.cpp host_mb): say who holds it up.
            if (t.host_s > K::kHostWait * step)
                return "Host-bound at " + pct(te.throughput.mfu) + " MFU: the GPU waits " + num(t.host_s, 3) + " s (" +
                       pct(t.host_s / step) + ") of each step for the host to issue its work" +
                       (t.zero3_hooks_s > 0 ? " -- DeepSpeed ZeRO-3's per-module fetch/release hooks take " + num(t.zero3_hooks_s, 3) +
                                                  " s of host time, the kernel launches the rest."
                                            : " (kernel launches from eager model code): too little work per micro-batch.");
            return "Compute-bound at " + pct(te.throughput.mfu) + " MFU" +
                   (te.throughput.mfu < K::kLowMfu ? " -- low: the GEMMs are small or the layout is wrong."
                    : obs.gpus_idle()           ? " in the model, but your GPUs are not busy all the time (below)."
                                                : ": the GPUs are busy with useful work.");
    }
    return "";
}

}  // namespace

Bottleneck classify(const Scenario& s, const MemoryBreakdown& m, const TimeBreakdown& t) {
    if (!m.fits() || m.headroom() < K::kMemoryHeadroom * m.capacity) return Bottleneck::Memory;
    return classify_time(s, t);
}

Diagnosis diagnose(const Scenario& s, const MemoryBreakdown& m, const TimeEstimate& te, const Observations& obs,
                   double as_given_tps, double observed_tps) {
    Diagnosis d;
    const TimeBreakdown& t = te.time;
    const double step = t.step_s;
    std::string rest = ", temporary " + gbs(m.temporary);
    if (m.peak_at_step)
        rest += " (the peak is at the optimizer step: " + gbs(m.step_copies) +
                " of " + step_copies_name(s.setup) + ")";
    d.evidence.push_back("memory per GPU " + gbs(m.total) + " of " + gbs(m.capacity) + " (weights " + gbs(m.weights) + ", gradients " +
                         gbs(m.gradients) + ", optimizer " + gbs(m.optimizer) + ", activations " + gbs(m.activations) + ", logits " +
                         gbs(m.logits) + rest + ")");
    d.evidence.push_back("step " + num(step, 3) + " s: compute " + pct(t.compute_s / step) + " (memory-bound ops " +
                         pct(t.compute_s > 0 ? t.memory_bound_s / t.compute_s : 0) + " of it), communication " +
                         pct(t.communication_s / step) + ", bubble " + pct(t.bubble_s / step) + ", optimizer " +
                         pct(t.optimizer_s / step) + ", offload " + pct(t.offload_s / step) + ", data stall " + pct(t.data_s / step));
    d.evidence.push_back("MFU " + pct(te.throughput.mfu) + ", " + num(te.throughput.tokens_per_s, 0) + " tokens/s predicted");

    std::vector<std::string> disagreements;
    Bottleneck b = classify(s, m, t);
    if (obs.oom) b = Bottleneck::Memory;
    // A run the user reports as training cannot be "does not fit": say so, and
    // diagnose its speed instead.
    if (!m.fits() && obs.reports_running()) {
        disagreements.push_back("it predicts " + gbs(m.total) + " per GPU, more than the " + gbs(m.capacity) +
                                " available, yet your run trains" +
                                (obs.peak_memory_bytes ? " (peak " + gbs(*obs.peak_memory_bytes) + " observed)" : std::string()) +
                                "; either the run differs from the scenario given (micro-batch, sequence, recompute, offload) or the "
                                "model overestimates a term");
        b = classify_time(s, t);
    }
    // GPUs seen idling while the model keeps them busy.
    if (obs.gpus_idle() && !explains_idle(b) && b != Bottleneck::Memory) {
        disagreements.push_back("it keeps the GPUs busy through the step (no loader stall, " + pct(t.communication_s / step) +
                                " exposed communication), you see " + observed_util(obs) +
                                "; idle time the model does not see comes from the data loader, host-side work (Python, logging, "
                                "checkpoints) or a straggler GPU");
        if (obs.util_swings) b = Bottleneck::DataPipeline;
    }
    d.bottleneck = b;
    d.headline = headline(b, s, m, te, obs);

    std::string gap;
    if (observed_tps > 0) {
        const double ratio = as_given_tps / observed_tps;
        if (ratio < 1 / K::kModelAgrees) {
            disagreements.push_back("observed " + num(observed_tps, 0) + " tokens/s is " + num(1 / ratio, 2) + "x above its " +
                                    num(as_given_tps, 0) + " tokens/s; the model is pessimistic here (`trainplan calibrate` fits its "
                                    "efficiencies to your runs)");
        } else if (ratio < K::kModelAgrees) {
            gap = "Observed throughput matches the model within 15 %: the prediction explains the run.";
        } else {
            gap = "Observed " + num(observed_tps, 0) + " tokens/s is " + num(ratio, 2) + "x below the model's " + num(as_given_tps, 0) +
                  " tokens/s for this setup";
            if (b == Bottleneck::DataPipeline)
                gap += std::string("; ") + (obs.util_swings ? "with utilization swinging" : "with the GPUs waiting") +
                       (s.run.loader_workers > 0 ? " and " + std::to_string(s.run.loader_workers) + " loader workers" : "") +
                       " the gap points to the data pipeline";
            else if (s.run.sustained_clock < 1)
                gap += "; the lowered clock explains " + pct(1 - s.run.sustained_clock) + " of it";
            else
                gap += "; look for a data-loader stall, thermal throttling, CPU-side overhead or a straggler GPU";
            gap += ".";
        }
    }
    if (!disagreements.empty()) {
        d.disagrees = true;
        std::string text = "Your observation disagrees with the model: ";
        for (size_t i = 0; i < disagreements.size(); ++i) text += (i ? "; and " : "") + disagreements[i];
        gap = text + "." + (gap.empty() ? "" : " " + gap);
    }
    d.observation_gap = gap;
    return d;
}

}  // namespace trainplan
