#include "trainplan/fit.hpp"

#include "trainplan/moves.hpp"
#include "trainplan/time.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>

namespace trainplan {

namespace {

using Apply = std::function<bool(Scenario&, Changes&)>;

bool more_recompute(Scenario& s, Changes& ch, Recompute r) { return s.setup.recompute < r && set_recompute(s, r, ch); }

bool use_method(Scenario& s, Changes& ch, Method m) {
    if (m == Method::LoRA && s.setup.method == Method::QLoRA) return false;  // LoRA on top of QLoRA is a step back
    return set_method(s, m, ch);
}

bool use_8bit_adam(Scenario& s, Changes& ch) {
    if (s.setup.optimizer != OptimizerKind::AdamW || s.setup.method != Method::Full) return false;
    return set_optimizer(s, OptimizerKind::AdamW8bit, ch);
}

// More GPUs of the same kind up the one GPU ladder, sharding model states with
// ZeRO-3 (ZeRO-1 under pipeline parallelism) over the data-parallel group, and
// full recompute when that saves more GPUs than it costs in time.
bool more_gpus(Scenario& s, Changes& ch, int& extra) {
    const int start = s.cluster.num_gpus;
    for (int n : gpu_ladder(growth_node_size(s.cluster), start + 1, 4096)) {
        Scenario trial = s;
        Changes tc = ch;
        if (!set_data_parallel(trial, n, tc, true)) continue;
        set_zero(trial, s.setup.layout.pp > 1 ? 1 : 3, tc);
        if (!validate(trial).empty()) continue;
        if (!estimate_memory(trial).peak().fits()) {
            if (!more_recompute(trial, tc, Recompute::Full) || !estimate_memory(trial).peak().fits()) continue;
        }
        extra = n - start;
        s = trial;
        ch = tc;
        return true;
    }
    return false;
}

}  // namespace

FitReport check_fit(const Scenario& s, int max_remedies) {
    FitReport rep;
    rep.estimate = estimate_memory(s);
    rep.fits = rep.estimate.peak().fits();
    const TimeEstimate base_time = estimate_time(s);
    rep.step_s = base_time.time.step_s;
    if (rep.fits) return rep;

    int extra_gpus = 0;
    struct Primary {
        std::string title;
        int cost;
        bool changes_result;
        std::string cost_text;
        Apply apply;
    };
    const std::vector<Primary> primaries = {
        {"FlashAttention", 0, false, "none: exact attention, usually faster", set_flash_attention},
        {"Liger fused linear cross-entropy", 0, false,
         "none: the head and loss run in token chunks, same loss; the logits are never whole (liger-kernel)", set_fused_linear_ce},
        {"DDP gradient_as_bucket_view=True", 0, false, "none: the gradients become views into DDP's all-reduce buckets",
         set_ddp_bucket_view},
        {"4-bit model prepared without the fp32 upcast", 0, false,
         "none: norms, embeddings, head and adapters stay 16-bit, the stream between the matmuls too (fms-acceleration's and "
         "Unsloth's prepare; or cast the norms and embeddings back after prepare_model_for_kbit_training)",
         unset_kbit_upcast},
        {"DeepSpeed sub_group_size=1e8", 0, false, "none: the ZeRO-3 step copies its gradients to fp32 1e8 elements at a time",
         shrink_ds_sub_group},
        {"optimizer step in backward", 1, false,
         "each gradient stepped and freed as backward makes it (torchtune optimizer_in_bwd): no gradient accumulation, no global-norm clipping",
         set_optimizer_in_backward},
        {"NCCL_NVLS_ENABLE=0", 1, false,
         "no NVLink SHARP buffers; all-reduce runs as rings in the switch's place (~370 instead of ~480 GB/s bus bandwidth on 8 x H100, NVIDIA/nccl-tests#212)",
         disable_nvls},
        {"selective recompute", 1, false, "~2-4 % more compute (attention core recomputed)",
         [](Scenario& x, Changes& c) { return more_recompute(x, c, Recompute::Selective); }},
        {"smaller micro-batch, more accumulation", 2, false, "same global batch; smaller GEMMs run less efficiently",
         shrink_micro_batch},
        {"8-bit AdamW", 2, false, "optimizer states quantized to 8 bits (bitsandbytes); near-identical loss curves",
         use_8bit_adam},
        {"ZeRO-1 over the data-parallel GPUs", 2, false, "shards optimizer states; same traffic as all-reduce",
         [](Scenario& x, Changes& c) { return x.setup.zero_stage < 1 && set_zero(x, 1, c); }},
        {"ZeRO-2 over the data-parallel GPUs", 2, false, "also shards gradients; same traffic as all-reduce",
         [](Scenario& x, Changes& c) { return x.setup.zero_stage < 2 && set_zero(x, 2, c); }},
        {"ZeRO-3 / FSDP over the data-parallel GPUs", 3, false, "also shards weights; ~1.5x the data-parallel traffic",
         [](Scenario& x, Changes& c) { return x.setup.zero_stage < 3 && set_zero(x, 3, c); }},
        {"full activation recompute", 3, false, "~33 % more compute (one extra forward pass)",
         [](Scenario& x, Changes& c) { return more_recompute(x, c, Recompute::Full); }},
        {"LoRA", 4, true, "trains low-rank adapters instead of all weights",
         [](Scenario& x, Changes& c) { return use_method(x, c, Method::LoRA); }},
        {"optimizer offload to CPU (ZeRO-Offload)", 5, false,
         "optimizer step on the CPU; gradients and weights cross PCIe every step", offload_optimizer},
        {"QLoRA (4-bit NF4 base)", 5, true, "adapters on a 4-bit quantized base; dequantization slows GEMMs",
         [](Scenario& x, Changes& c) { return use_method(x, c, Method::QLoRA); }},
        {"parameter + optimizer offload to CPU (ZeRO-Infinity)", 7, false,
         "weights stream over PCIe every forward and backward; often several times slower", offload_params},
        {"more GPUs", 8, false, "more hardware",
         [&extra_gpus](Scenario& x, Changes& c) { return more_gpus(x, c, extra_gpus); }},
    };
    // Cheap supporting changes added, in order, when a primary alone is not enough.
    const std::vector<std::pair<std::string, Apply>> supports = {
        {"FlashAttention", set_flash_attention},
        {"fused linear cross-entropy", set_fused_linear_ce},
        {"DDP bucket view", set_ddp_bucket_view},
        {"no fp32 upcast", unset_kbit_upcast},
        {"DeepSpeed sub_group_size", shrink_ds_sub_group},
        {"NVLS off", disable_nvls},
        {"selective recompute", [](Scenario& x, Changes& c) { return more_recompute(x, c, Recompute::Selective); }},
        {"full recompute", [](Scenario& x, Changes& c) { return more_recompute(x, c, Recompute::Full); }},
        {"micro-batch", shrink_micro_batch},
    };

    std::set<std::string> seen;
    for (const Primary& p : primaries) {
        Scenario x = s;
        Changes changes;
        extra_gpus = 0;
        if (!p.apply(x, changes)) continue;
        if (!validate(x).empty()) continue;
        MemoryBreakdown mem = estimate_memory(x).peak();
        std::vector<size_t> used;  // the supporting changes added, in order
        for (size_t i = 0; i < supports.size() && !mem.fits(); ++i) {
            if (!supports[i].second(x, changes)) continue;
            used.push_back(i);
            mem = estimate_memory(x).peak();
        }
        if (!mem.fits() || !validate(x).empty()) continue;
        // Keep only the supporting changes the fit needs: one added later (full
        // recompute) can make an earlier one (fused cross-entropy, selective
        // recompute) unnecessary. Each is dropped in turn where the rest still fit.
        for (size_t k = 0; k < used.size();) {
            Scenario y = s;
            Changes cy;
            extra_gpus = 0;
            p.apply(y, cy);
            for (size_t m = 0; m < used.size(); ++m)
                if (m != k) supports[used[m]].second(y, cy);
            const MemoryBreakdown my = estimate_memory(y).peak();
            if (my.fits() && validate(y).empty()) {
                used.erase(used.begin() + static_cast<std::ptrdiff_t>(k));
                x = std::move(y);
                changes = std::move(cy);
                mem = my;
            } else {
                ++k;
            }
        }
        const auto uses = [&](const char* name) {
            return std::any_of(used.begin(), used.end(), [&](size_t i) { return supports[i].first == name; });
        };
        // Selective recompute that needs full recompute is full recompute, listed on its own.
        if (p.title == "selective recompute" && uses("full recompute")) continue;
        // (Selective and full recompute never both stay: full alone fits where both do.)
        std::string title = p.title;
        for (size_t i : used) title += " + " + supports[i].first;
        const int cost = p.cost + static_cast<int>(used.size());
        std::string key;
        for (const auto& c : changes.lines) key += c + ";";
        if (!seen.insert(key).second) continue;
        Remedy r;
        r.title = title;
        r.changes = changes.lines;
        r.cost = p.cost_text;
        r.changes_result = p.changes_result || x.setup.global_batch() != s.setup.global_batch();
        r.rank_cost = cost;
        r.extra_gpus = extra_gpus;
        r.scenario = x;
        r.memory = mem;
        const TimeEstimate te = estimate_time(x);
        r.step_s = te.time.step_s;
        // Time per token (the step ratio when the global batch is unchanged; more
        // GPUs may have to grow the batch).
        r.slowdown = te.throughput.tokens_per_s > 0 ? base_time.throughput.tokens_per_s / te.throughput.tokens_per_s - 1.0 : 0.0;
        rep.remedies.push_back(std::move(r));
    }
    // A remedy that makes every change another one makes, and more, is no faster
    // and not needed (more GPUs aside: they buy speed as well as memory).
    const auto subset = [](const Remedy& a, const Remedy& b) {  // a's changes a strict subset of b's
        if (a.changes.size() >= b.changes.size()) return false;
        return std::all_of(a.changes.begin(), a.changes.end(),
                           [&](const std::string& c) { return std::find(b.changes.begin(), b.changes.end(), c) != b.changes.end(); });
    };
    std::vector<Remedy> kept;
    for (const Remedy& r : rep.remedies) {
        const bool covered = r.extra_gpus == 0 && std::any_of(rep.remedies.begin(), rep.remedies.end(), [&](const Remedy& q) {
                                 return subset(q, r) && q.slowdown <= r.slowdown + 0.005;
                             });
        if (!covered) kept.push_back(r);
    }
    rep.remedies = std::move(kept);
    std::stable_sort(rep.remedies.begin(), rep.remedies.end(), [](const Remedy& a, const Remedy& b) {
        if ((a.extra_gpus > 0) != (b.extra_gpus > 0)) return b.extra_gpus > 0;
        if (std::fabs(a.slowdown - b.slowdown) > 0.005) return a.slowdown < b.slowdown;
        if (a.changes_result != b.changes_result) return b.changes_result;
        return a.rank_cost < b.rank_cost;
    });
    if (static_cast<int>(rep.remedies.size()) > max_remedies) rep.remedies.resize(static_cast<size_t>(max_remedies));
    return rep;
}

}  // namespace trainplan
