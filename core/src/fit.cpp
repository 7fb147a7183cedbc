#include "trainplan/fit.hpp"

#include "trainplan/time.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>

namespace trainplan {

namespace {

struct Atom {
    std::string name;
    int cost;
    bool changes_result;
    std::string cost_text;
    // Applies the change; returns false when it does not apply to this scenario.
    std::function<bool(Scenario&, std::vector<std::string>&)> apply;
};

std::string arrow(const std::string& key, const std::string& from, const std::string& to) {
    return key + ": " + from + " -> " + to;
}

bool set_recompute(Scenario& s, std::vector<std::string>& ch, Recompute r) {
    if (s.setup.recompute >= r) return false;
    // Selective then full reads as one change: none -> full.
    auto prev = std::find_if(ch.begin(), ch.end(), [](const std::string& c) { return c.rfind("recompute:", 0) == 0; });
    if (prev != ch.end()) {
        *prev = arrow("recompute", prev->substr(11, prev->find(' ', 11) - 11), to_string(r));
    } else {
        ch.push_back(arrow("recompute", to_string(s.setup.recompute), to_string(r)));
    }
    s.setup.recompute = r;
    return true;
}

bool set_flash(Scenario& s, std::vector<std::string>& ch) {
    if (s.setup.flash_attention) return false;
    ch.push_back("flash_attention: off -> on");
    s.setup.flash_attention = true;
    return true;
}

// Smallest micro-batch (halving) that keeps the global batch through more
// accumulation steps.
bool shrink_micro_batch(Scenario& s, std::vector<std::string>& ch) {
    TrainingSetup& t = s.setup;
    if (t.micro_batch <= 1) return false;
    std::int64_t mb = t.micro_batch;
    while (mb > 1 && mb % 2 == 0) {
        mb /= 2;
        Scenario trial = s;
        trial.setup.grad_accum = t.grad_accum * (t.micro_batch / mb);
        trial.setup.micro_batch = mb;
        if (estimate_memory(trial).peak().fits()) break;
    }
    if (mb == t.micro_batch && t.micro_batch % 2 != 0) mb = 1;
    const std::int64_t ga = t.grad_accum * t.micro_batch / mb;
    ch.push_back(arrow("micro_batch", std::to_string(t.micro_batch), std::to_string(mb)) + ", grad_accum " +
                 std::to_string(t.grad_accum) + " -> " + std::to_string(ga) + " (same global batch)");
    t.grad_accum = ga;
    t.micro_batch = mb;
    return true;
}

bool set_zero(Scenario& s, std::vector<std::string>& ch, int stage) {
    TrainingSetup& t = s.setup;
    if (t.layout.dp <= 1 || t.zero_stage >= stage) return false;
    if (stage >= 2 && t.layout.pp > 1) return false;
    ch.push_back(arrow("zero", std::to_string(t.zero_stage), std::to_string(stage)) + " over dp = " +
                 std::to_string(t.layout.dp));
    t.zero_stage = stage;
    return true;
}

bool offload_optimizer(Scenario& s, std::vector<std::string>& ch) {
    TrainingSetup& t = s.setup;
    if (t.optimizer_offload != Offload::None) return false;
    if (t.zero_stage == 0) {
        ch.push_back(arrow("zero", "0", t.layout.pp > 1 ? "1" : "2"));
        t.zero_stage = t.layout.pp > 1 ? 1 : 2;
    }
    ch.push_back(arrow("optimizer_offload", "none", "cpu"));
    t.optimizer_offload = Offload::CPU;
    return true;
}

bool offload_params(Scenario& s, std::vector<std::string>& ch) {
    TrainingSetup& t = s.setup;
    if (t.layout.pp > 1 || t.param_offload != Offload::None) return false;
    if (t.zero_stage != 3) {
        ch.push_back(arrow("zero", std::to_string(t.zero_stage), "3"));
        t.zero_stage = 3;
    }
    if (t.optimizer_offload == Offload::None) {
        ch.push_back(arrow("optimizer_offload", "none", "cpu"));
        t.optimizer_offload = Offload::CPU;
    }
    ch.push_back(arrow("param_offload", "none", "cpu"));
    t.param_offload = Offload::CPU;
    return true;
}

bool use_8bit_adam(Scenario& s, std::vector<std::string>& ch) {
    if (s.setup.optimizer != OptimizerKind::AdamW || s.setup.method != Method::Full) return false;
    ch.push_back(arrow("optimizer", "adamw", "adamw-8bit"));
    s.setup.optimizer = OptimizerKind::AdamW8bit;
    return true;
}

bool use_method(Scenario& s, std::vector<std::string>& ch, Method m) {
    if (s.setup.method == m || (m == Method::LoRA && s.setup.method == Method::QLoRA)) return false;
    ch.push_back(arrow("method", to_string(s.setup.method), to_string(m)) + " (rank " +
                 std::to_string(s.setup.lora.rank) + ", all linear layers)");
    s.setup.method = m;
    s.setup.lora.targets = kLoraAll;
    if (m == Method::QLoRA && (s.setup.precision == Precision::FP32 || s.setup.precision == Precision::FP16Mixed ||
                               s.setup.precision == Precision::FP8Mixed)) {
        ch.push_back(arrow("precision", to_string(s.setup.precision), "bf16"));
        s.setup.precision = Precision::BF16;
    }
    return true;
}

// More GPUs of the same kind, sharding model states with ZeRO-3 (FSDP full
// shard) over the data-parallel group.
bool more_gpus(Scenario& s, std::vector<std::string>& ch, int& extra) {
    const int mp = s.setup.layout.tp * s.setup.layout.pp;
    const int start = s.cluster.num_gpus;
    for (int n = std::max(2, start * 2); n <= 4096; n *= 2) {
        if (n % mp != 0) continue;
        Scenario trial = s;
        trial.cluster.num_gpus = n;
        trial.setup.layout.dp = n / mp;
        trial.setup.zero_stage = s.setup.layout.pp > 1 ? 1 : 3;
        // Keep the global batch when it divides evenly.
        const std::int64_t gb = s.setup.global_batch();
        const std::int64_t per = trial.setup.micro_batch * trial.setup.layout.dp;
        trial.setup.grad_accum = std::max<std::int64_t>(1, gb / per);
        if (!validate(trial).empty()) continue;
        if (!estimate_memory(trial).peak().fits()) {
            // Full recompute often saves more GPUs than it costs in time.
            if (trial.setup.recompute == Recompute::Full) continue;
            trial.setup.recompute = Recompute::Full;
            if (!estimate_memory(trial).peak().fits()) continue;
        }
        ch.push_back(arrow("gpus", std::to_string(start), std::to_string(n)) + " (dp " +
                     std::to_string(s.setup.layout.dp) + " -> " + std::to_string(trial.setup.layout.dp) + ")");
        if (trial.setup.zero_stage != s.setup.zero_stage)
            ch.push_back(arrow("zero", std::to_string(s.setup.zero_stage), std::to_string(trial.setup.zero_stage)));
        if (trial.setup.recompute != s.setup.recompute)
            ch.push_back(arrow("recompute", to_string(s.setup.recompute), to_string(trial.setup.recompute)));
        extra = n - start;
        s = trial;
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
    using Apply = std::function<bool(Scenario&, std::vector<std::string>&)>;
    struct Primary {
        std::string title;
        int cost;
        bool changes_result;
        std::string cost_text;
        Apply apply;
    };
    const std::vector<Primary> primaries = {
        {"FlashAttention", 0, false, "none: exact attention, usually faster", set_flash},
        {"selective recompute", 1, false, "~2-4 % more compute (attention core recomputed)",
         [](Scenario& x, auto& c) { return set_recompute(x, c, Recompute::Selective); }},
        {"smaller micro-batch, more accumulation", 2, false, "same global batch; smaller GEMMs run less efficiently",
         shrink_micro_batch},
        {"8-bit AdamW", 2, false, "optimizer states quantized to 8 bits (bitsandbytes); near-identical loss curves",
         use_8bit_adam},
        {"ZeRO-1 over the data-parallel GPUs", 2, false, "shards optimizer states; same traffic as all-reduce",
         [](Scenario& x, auto& c) { return set_zero(x, c, 1); }},
        {"ZeRO-2 over the data-parallel GPUs", 2, false, "also shards gradients; same traffic as all-reduce",
         [](Scenario& x, auto& c) { return set_zero(x, c, 2); }},
        {"ZeRO-3 / FSDP over the data-parallel GPUs", 3, false, "also shards weights; ~1.5x the data-parallel traffic",
         [](Scenario& x, auto& c) { return set_zero(x, c, 3); }},
        {"full activation recompute", 3, false, "~33 % more compute (one extra forward pass)",
         [](Scenario& x, auto& c) { return set_recompute(x, c, Recompute::Full); }},
        {"LoRA", 4, true, "trains low-rank adapters instead of all weights",
         [](Scenario& x, auto& c) { return use_method(x, c, Method::LoRA); }},
        {"optimizer offload to CPU (ZeRO-Offload)", 5, false,
         "optimizer step on the CPU; gradients and weights cross PCIe every step", offload_optimizer},
        {"QLoRA (4-bit NF4 base)", 5, true, "adapters on a 4-bit quantized base; dequantization slows GEMMs",
         [](Scenario& x, auto& c) { return use_method(x, c, Method::QLoRA); }},
        {"parameter + optimizer offload to CPU (ZeRO-Infinity)", 7, false,
         "weights stream over PCIe every forward and backward; often several times slower", offload_params},
        {"more GPUs", 8, false, "more hardware",
         [&extra_gpus](Scenario& x, auto& c) { return more_gpus(x, c, extra_gpus); }},
    };
    // Cheap supporting changes added, in order, when a primary alone is not enough.
    const std::vector<std::pair<std::string, Apply>> supports = {
        {"FlashAttention", set_flash},
        {"selective recompute", [](Scenario& x, auto& c) { return set_recompute(x, c, Recompute::Selective); }},
        {"full recompute", [](Scenario& x, auto& c) { return set_recompute(x, c, Recompute::Full); }},
        {"micro-batch", shrink_micro_batch},
    };

    std::set<std::string> seen;
    for (const Primary& p : primaries) {
        Scenario x = s;
        std::vector<std::string> changes;
        extra_gpus = 0;
        if (!p.apply(x, changes)) continue;
        if (!validate(x).empty()) continue;
        MemoryBreakdown mem = estimate_memory(x).peak();
        std::string title = p.title;
        int cost = p.cost;
        for (const auto& [name, apply] : supports) {
            if (mem.fits()) break;
            if (!apply(x, changes)) continue;
            mem = estimate_memory(x).peak();
            const std::string sel = " + selective recompute";
            if (name == "full recompute" && title.size() >= sel.size() && title.compare(title.size() - sel.size(), sel.size(), sel) == 0)
                title.resize(title.size() - sel.size());
            title += " + " + name;
            cost += 1;
        }
        if (!mem.fits()) continue;
        std::string key;
        for (const auto& c : changes) key += c + ";";
        if (!seen.insert(key).second) continue;
        Remedy r;
        r.title = title;
        r.changes = changes;
        r.cost = p.cost_text;
        r.changes_result = p.changes_result;
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
