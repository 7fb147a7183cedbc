#include "trainplan/moves.hpp"

#include <algorithm>
#include <sstream>

#include "trainplan/memory.hpp"
#include "trainplan/opgraph.hpp"

namespace trainplan {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

bool fits(const Scenario& s) { return estimate_memory(s).peak().fits(); }

// Rewrites micro-batch and accumulation, noting both on one line.
void note_batch(Scenario& s, std::int64_t mb, std::int64_t ga, Changes& ch, const char* why) {
    TrainingSetup& t = s.setup;
    ch.note("micro_batch", str(t.micro_batch), str(mb),
            ", grad_accum " + str(t.grad_accum) + " -> " + str(ga) + " (" + why + ")");
    t.micro_batch = mb;
    t.grad_accum = ga;
}

}  // namespace

void Changes::note(const std::string& key, const std::string& from, const std::string& to, const std::string& extra) {
    const std::string prefix = key + ": ";
    for (auto& l : lines) {
        if (l.rfind(prefix, 0) != 0) continue;
        // Keep the first "from": the chain reads as one change.
        const std::string first = l.substr(prefix.size(), l.find(" -> ") - prefix.size());
        // A note that itself describes a transition ("dp 8 -> 32") would now
        // misread against the merged "from"; it is left out.
        l = prefix + first + " -> " + to + (extra.find(" -> ") == std::string::npos ? extra : "");
        return;
    }
    lines.push_back(prefix + from + " -> " + to + extra);
}

void apply_method_recipe(TrainingSetup& t, Method m) {
    if (m == Method::QLoRA) {
        t.qlora.quant = QuantType::NF4;
        t.qlora.double_quant = true;
        t.qlora.block_size = 64;
        // Paged AdamW (bitsandbytes paged_adamw_32bit) by its contextual default
        // (paged_optimizer_on): on unless a DeepSpeed ZeRO engine builds the optimizer.
        t.paged_optimizer.reset();
        t.optimizer = OptimizerKind::AdamW;
        t.precision = Precision::BF16;       // bf16 compute dtype and adapters
        t.lora.targets = kLoraAll;
        t.recompute = Recompute::Full;       // gradient checkpointing
    } else if (t.method == Method::QLoRA && t.precision == Precision::BF16) {
        t.precision = Precision::BF16Mixed;
    }
    // PEFT's kbit preparation exists only for a 4-bit base.
    if (m != Method::QLoRA) t.qlora.kbit_upcast = false;
    t.method = m;
}

bool set_method(Scenario& s, Method m, Changes& ch) {
    TrainingSetup& t = s.setup;
    if (t.method == m) return false;
    const TrainingSetup before = t;
    apply_method_recipe(t, m);
    ch.note("method", to_string(before.method), to_string(m),
            m == Method::Full ? "" : " (rank " + str(t.lora.rank) + (t.lora.targets == kLoraAll ? ", all linear layers)" : ")"));
    if (t.precision != before.precision) ch.note("precision", to_string(before.precision), to_string(t.precision));
    if (t.optimizer != before.optimizer) ch.note("optimizer", to_string(before.optimizer), to_string(t.optimizer));
    if (t.recompute != before.recompute) ch.note("recompute", to_string(before.recompute), to_string(t.recompute));
    if (t.lora.targets != before.lora.targets) ch.note("lora_targets", "custom", "all linear layers");
    if (t.qlora.quant != before.qlora.quant) ch.note("quant", to_string(before.qlora.quant), to_string(t.qlora.quant));
    if (t.qlora.double_quant != before.qlora.double_quant) ch.note("double_quant", "off", "on");
    if (paged_optimizer_on(t) != paged_optimizer_on(before)) ch.note("paged_optimizer", "off", "on");
    return true;
}

bool set_recompute(Scenario& s, Recompute r, Changes& ch) {
    if (s.setup.recompute == r) return false;
    ch.note("recompute", to_string(s.setup.recompute), to_string(r));
    s.setup.recompute = r;
    return true;
}

bool set_flash_attention(Scenario& s, Changes& ch) {
    if (s.setup.flash_attention) return false;
    ch.note("flash_attention", "off", "on");
    s.setup.flash_attention = true;
    return true;
}

bool set_fused_linear_ce(Scenario& s, Changes& ch) {
    const TrainingSetup& t = s.setup;
    if (fused_linear_ce_on(t) || !fused_linear_ce_runs(t)) return false;
    ch.note("fused_linear_ce", "off", "on", " (Liger: use_liger_kernel=True)");
    s.setup.fused_linear_ce = true;
    return true;
}

bool set_ddp_bucket_view(Scenario& s, Changes& ch) {
    if (!runs_torch_ddp(s.setup) || s.setup.ddp_bucket_view) return false;
    ch.note("ddp_bucket_view", "off", "on");
    s.setup.ddp_bucket_view = true;
    return true;
}

bool unset_kbit_upcast(Scenario& s, Changes& ch) {
    if (!fp32_stream(s.setup)) return false;
    ch.note("kbit_upcast", "on", "off");
    s.setup.qlora.kbit_upcast = false;
    return true;
}

bool set_optimizer_in_backward(Scenario& s, Changes& ch) {
    const TrainingSetup& t = s.setup;
    if (t.optimizer_in_backward || t.grad_accum > 1 || t.optimizer_offload != Offload::None || runs_deepspeed_zero(t) ||
        t.framework == Framework::Megatron)
        return false;
    ch.note("optimizer_in_backward", "off", "on");
    s.setup.optimizer_in_backward = true;
    return true;
}

bool set_ds_overlap_comm(Scenario& s, Changes& ch) {
    const TrainingSetup& t = s.setup;
    if (!runs_deepspeed_zero12(t) || t.layout.dp * t.layout.cp <= 1 || ds_overlap_comm_on(t)) return false;
    ch.note("ds_overlap_comm", "off", "on");
    s.setup.ds_overlap_comm = true;
    return true;
}

bool upgrade_ds_reduce(Scenario& s, Changes& ch) {
    const TrainingSetup& t = s.setup;
    if (!runs_deepspeed_zero12(t) || t.layout.dp * t.layout.cp <= 1 || !t.ds_reduce_per_rank) return false;
    ch.note("ds_reduce_per_rank", "on", "off");
    s.setup.ds_reduce_per_rank = false;
    set_ds_overlap_comm(s, ch);  // and overlap_comm on, where it is off
    return true;
}

bool shrink_ds_sub_group(Scenario& s, Changes& ch) {
    constexpr double kSmaller = 1e8;
    if (!runs_deepspeed_zero3(s.setup) || s.setup.ds_sub_group_size <= kSmaller || !estimate_memory(s).peak().peak_at_step) return false;
    auto g = [](double v) {
        std::ostringstream o;
        o << v;
        return o.str();
    };
    ch.note("ds_sub_group_size", g(s.setup.ds_sub_group_size), g(kSmaller));
    s.setup.ds_sub_group_size = kSmaller;
    return true;
}

bool disable_nvls(Scenario& s, Changes& ch) {
    if (s.setup.nccl == NcclRelease::NvlsOff || estimate_memory(s).peak().nccl_nvls <= 0) return false;
    ch.note("nccl", to_string(s.setup.nccl), to_string(NcclRelease::NvlsOff), " (NCCL_NVLS_ENABLE=0)");
    s.setup.nccl = NcclRelease::NvlsOff;
    return true;
}

bool set_precision(Scenario& s, Precision p, Changes& ch) {
    if (s.setup.precision == p) return false;
    ch.note("precision", to_string(s.setup.precision), to_string(p));
    s.setup.precision = p;
    return true;
}

bool set_optimizer(Scenario& s, OptimizerKind o, Changes& ch) {
    if (s.setup.optimizer == o) return false;
    ch.note("optimizer", to_string(s.setup.optimizer), to_string(o));
    s.setup.optimizer = o;
    return true;
}

bool set_zero(Scenario& s, int stage, Changes& ch) {
    TrainingSetup& t = s.setup;
    if (t.layout.dp <= 1 || t.zero_stage == stage) return false;
    ch.note("zero", str(t.zero_stage), str(stage), " over dp = " + str(t.layout.dp));
    t.zero_stage = stage;
    if (t.fsdp != FsdpStrategy::None && stage != 3) t.fsdp = FsdpStrategy::None;
    return true;
}

bool leave_zero3(Scenario& s, Changes& ch) {
    TrainingSetup& t = s.setup;
    if (!runs_deepspeed_zero3(t) || t.param_offload != Offload::None) return false;
    ch.note("zero", "3", "2", t.layout.dp * t.layout.cp > 1 ? " (16-bit weights whole on each rank)" : " (one rank: nothing was sharded)");
    t.zero_stage = 2;
    return true;
}

bool offload_optimizer(Scenario& s, Changes& ch) {
    TrainingSetup& t = s.setup;
    if (t.optimizer_offload != Offload::None) return false;
    if (t.zero_stage == 0) {
        const int z = t.layout.pp > 1 ? 1 : 2;
        ch.note("zero", "0", str(z));
        t.zero_stage = z;
    }
    ch.note("optimizer_offload", "none", "cpu");
    t.optimizer_offload = Offload::CPU;
    return true;
}

bool offload_params(Scenario& s, Changes& ch) {
    TrainingSetup& t = s.setup;
    if (t.param_offload != Offload::None) return false;
    if (t.zero_stage != 3) {
        ch.note("zero", str(t.zero_stage), "3");
        t.zero_stage = 3;
    }
    if (t.optimizer_offload == Offload::None) {
        ch.note("optimizer_offload", "none", "cpu");
        t.optimizer_offload = Offload::CPU;
    }
    ch.note("param_offload", "none", "cpu");
    t.param_offload = Offload::CPU;
    return true;
}

bool set_micro_batch(Scenario& s, std::int64_t mb, Changes& ch) {
    const TrainingSetup& t = s.setup;
    const std::int64_t per_replica = t.micro_batch * t.grad_accum;
    if (mb < 1 || mb == t.micro_batch || per_replica % mb != 0) return false;
    note_batch(s, mb, per_replica / mb, ch, "same global batch");
    return true;
}

bool shrink_micro_batch(Scenario& s, Changes& ch) {
    const TrainingSetup& t = s.setup;
    if (t.micro_batch <= 1) return false;
    std::int64_t mb = t.micro_batch;
    while (mb > 1 && mb % 2 == 0) {
        mb /= 2;
        Scenario trial = s;
        trial.setup.grad_accum = t.grad_accum * (t.micro_batch / mb);
        trial.setup.micro_batch = mb;
        if (fits(trial)) break;
    }
    if (mb == t.micro_batch) mb = 1;  // odd micro-batch: accumulate single sequences
    return set_micro_batch(s, mb, ch);
}

bool grow_micro_batch(Scenario& s, Changes& ch) {
    const std::int64_t per_replica = s.setup.micro_batch * s.setup.grad_accum;
    Scenario trial = s;
    for (std::int64_t mb = per_replica; mb > s.setup.micro_batch; --mb) {
        if (per_replica % mb != 0) continue;
        trial.setup.micro_batch = mb;
        trial.setup.grad_accum = per_replica / mb;
        if (fits(trial)) return set_micro_batch(s, mb, ch);
    }
    return false;
}

bool set_grad_accum(Scenario& s, std::int64_t ga, Changes& ch) {
    TrainingSetup& t = s.setup;
    if (ga < 1 || ga == t.grad_accum) return false;
    const std::int64_t gb = t.global_batch();
    t.grad_accum = ga;
    ch.note("grad_accum", str(gb / (t.micro_batch * t.layout.dp)), str(ga),
            " (global batch " + str(gb) + " -> " + str(t.global_batch()) + ")");
    return true;
}

int growth_node_size(const ClusterSpec& c) {
    return c.num_gpus <= c.gpus_per_node ? std::max(c.gpus_per_node, kGpusPerServer) : c.gpus_per_node;
}

bool set_data_parallel(Scenario& s, int gpus, Changes& ch, bool grow_batch) {
    TrainingSetup& t = s.setup;
    const int mp = t.layout.tp * t.layout.pp;
    if (gpus < 1 || gpus == s.cluster.num_gpus || gpus % mp != 0) return false;
    const int dp = gpus / mp;
    const std::int64_t gb = t.global_batch();
    std::int64_t mb = t.micro_batch;
    while (mb > 1 && gb % (mb * dp) != 0) --mb;
    std::int64_t ga = gb / (mb * dp);
    if (gb % (mb * dp) != 0) {
        if (!grow_batch) return false;  // fewer sequences per step than replicas
        ga = (gb + mb * dp - 1) / (mb * dp);
    }
    const int node = growth_node_size(s.cluster);
    ch.note("gpus", str(s.cluster.num_gpus), str(gpus), " (dp " + str(t.layout.dp) + " -> " + str(dp) + ")");
    if (mb != t.micro_batch) ch.note("micro_batch", str(t.micro_batch), str(mb));
    if (ga != t.grad_accum) ch.note("grad_accum", str(t.grad_accum), str(ga));
    if (mb * ga * dp != gb) ch.note("global_batch", str(gb), str(mb * ga * dp), " (one sequence per replica at least)");
    s.cluster.num_gpus = gpus;
    s.cluster.gpus_per_node = std::min(node, gpus);
    t.layout.dp = dp;
    t.micro_batch = mb;
    t.grad_accum = ga;
    return true;
}

std::vector<std::string> diff_settings(const Scenario& a, const Scenario& b) {
    Changes ch;
    // An empty id is a link the cluster does not have (one node: no inter-node fabric).
    auto cmp = [&](const char* key, const std::string& x, const std::string& y) {
        if (x != y) ch.note(key, x.empty() ? "none" : x, y.empty() ? "none" : y);
    };
    const TrainingSetup& p = a.setup;
    const TrainingSetup& q = b.setup;
    cmp("model", a.model.id, b.model.id);
    cmp("gpu", a.cluster.gpu.id, b.cluster.gpu.id);
    cmp("gpus", str(a.cluster.num_gpus), str(b.cluster.num_gpus));
    cmp("intra_node", a.cluster.intra_node.id, b.cluster.intra_node.id);
    cmp("inter_node", a.cluster.inter_node.id, b.cluster.inter_node.id);
    cmp("method", to_string(p.method), to_string(q.method));
    cmp("precision", to_string(p.precision), to_string(q.precision));
    cmp("optimizer", to_string(p.optimizer), to_string(q.optimizer));
    cmp("tp", str(p.layout.tp), str(q.layout.tp));
    cmp("pp", str(p.layout.pp), str(q.layout.pp));
    cmp("dp", str(p.layout.dp), str(q.layout.dp));
    cmp("vp", str(p.layout.vp), str(q.layout.vp));
    cmp("schedule", to_string(p.layout.schedule), to_string(q.layout.schedule));
    cmp("sequence_parallel", p.layout.sequence_parallel ? "on" : "off", q.layout.sequence_parallel ? "on" : "off");
    cmp("ep", str(p.layout.ep), str(q.layout.ep));
    cmp("seq_len", str(p.seq_len), str(q.seq_len));
    cmp("micro_batch", str(p.micro_batch), str(q.micro_batch));
    cmp("grad_accum", str(p.grad_accum), str(q.grad_accum));
    cmp("zero", str(p.zero_stage), str(q.zero_stage));
    cmp("fsdp", to_string(p.fsdp), to_string(q.fsdp));
    cmp("optimizer_offload", to_string(p.optimizer_offload), to_string(q.optimizer_offload));
    cmp("param_offload", to_string(p.param_offload), to_string(q.param_offload));
    cmp("recompute", to_string(p.recompute), to_string(q.recompute));
    cmp("flash_attention", p.flash_attention ? "on" : "off", q.flash_attention ? "on" : "off");
    cmp("tp_comm_overlap", p.tp_comm_overlap ? "on" : "off", q.tp_comm_overlap ? "on" : "off");
    return ch.lines;
}

std::vector<int> gpu_ladder(int gpus_per_node, int lo, int hi) {
    const int gpn = std::max(1, gpus_per_node);
    std::vector<int> v;
    for (int g = 1; g < gpn && g <= hi; g *= 2)
        if (g >= lo) v.push_back(g);
    for (long long g = gpn; g <= hi;) {
        if (g >= lo) v.push_back(static_cast<int>(g));
        const long long nodes = g / gpn;
        g += gpn * (nodes < 8 ? 1 : nodes < 32 ? 4 : nodes < 128 ? 16 : nodes < 512 ? 64 : 256);
    }
    return v;
}

}  // namespace trainplan
