#include "trainplan/training.hpp"

#include <string>

namespace trainplan {

// The enums' to_string live with their tables in enums.cpp.

namespace {

std::string num(std::int64_t v) { return std::to_string(v); }

struct Checker {
    std::vector<Diagnostic> out;
    void fail(const std::string& key, const std::string& msg) { out.push_back({"", 0, 0, key, msg}); }
    void at_least(const std::string& key, std::int64_t v, std::int64_t lo) {
        if (v < lo) fail(key, key + " = " + num(v) + " must be at least " + num(lo));
    }
    void at_most(const std::string& key, std::int64_t v, std::int64_t hi) {
        if (v > hi) fail(key, key + " = " + num(v) + " exceeds the supported maximum " + num(hi));
    }
};

}  // namespace

std::vector<Diagnostic> validate(const Scenario& s) {
    Checker c;
    const ModelSpec& m = s.model;
    const TrainingSetup& t = s.setup;
    const ParallelLayout& p = t.layout;

    // Ranges: generous enough for 10T-parameter models and 100,000-GPU clusters,
    // tight enough that every product below stays exact in 64-bit arithmetic.
    c.at_least("seq_len", t.seq_len, 1);
    c.at_most("seq_len", t.seq_len, 16 * 1024 * 1024);
    c.at_least("micro_batch", t.micro_batch, 1);
    c.at_most("micro_batch", t.micro_batch, 1 << 20);
    c.at_least("grad_accum", t.grad_accum, 1);
    c.at_most("grad_accum", t.grad_accum, 1 << 24);
    c.at_least("gpus", s.cluster.num_gpus, 1);
    c.at_most("gpus", s.cluster.num_gpus, 1 << 20);
    c.at_least("gpus_per_node", s.cluster.gpus_per_node, 1);
    if (t.zero_stage < 0 || t.zero_stage > 3)
        c.fail("zero", "zero = " + num(t.zero_stage) + " must be one of 0, 1, 2, 3");
    c.at_least("tp", p.tp, 1);
    c.at_least("pp", p.pp, 1);
    c.at_least("dp", p.dp, 1);
    c.at_least("ep", p.ep, 1);
    c.at_least("vp", p.vp, 1);
    if (!c.out.empty()) return c.out;

    if (p.world() != s.cluster.num_gpus)
        c.fail("gpus", "tp x pp x dp = " + num(p.tp) + " x " + num(p.pp) + " x " + num(p.dp) + " = " +
                           num(p.world()) + " must equal gpus = " + num(s.cluster.num_gpus));
    if (m.num_heads % p.tp != 0)
        c.fail("tp", "tp = " + num(p.tp) + " must divide num_heads = " + num(m.num_heads));
    else if (m.num_kv_heads % p.tp != 0)
        c.fail("tp", "tp = " + num(p.tp) + " must divide num_kv_heads = " + num(m.num_kv_heads) +
                         " (Megatron requires whole query groups per rank)");
    const std::int64_t ffn = m.is_moe() ? m.moe.expert_ffn : m.ffn;
    if (ffn % p.tp != 0)
        c.fail("tp", "tp = " + num(p.tp) + " must divide ffn_hidden_size = " + num(ffn));
    if (m.num_layers < std::int64_t{p.pp} * p.vp)
        c.fail("pp", "pp x vp = " + num(std::int64_t{p.pp} * p.vp) + " exceeds num_layers = " + num(m.num_layers));
    if (p.vp > 1 && p.schedule != Schedule::Interleaved)
        c.fail("vp", "vp = " + num(p.vp) + " needs the interleaved schedule (schedule = \"interleaved\")");
    if (p.schedule == Schedule::Interleaved) {
        if (p.pp < 2) c.fail("schedule", "the interleaved schedule needs pp >= 2, got pp = " + num(p.pp));
        else if (m.num_layers % (std::int64_t{p.pp} * p.vp) != 0)
            c.fail("vp", "num_layers = " + num(m.num_layers) + " must be divisible by pp x vp = " +
                             num(std::int64_t{p.pp} * p.vp) + " for the interleaved schedule");
    }
    if (p.ep > 1) {
        if (!m.is_moe())
            c.fail("ep", "ep = " + num(p.ep) + " needs a mixture-of-experts model; " + m.name + " is dense");
        else if (m.moe.num_experts % p.ep != 0)
            c.fail("ep", "ep = " + num(p.ep) + " must divide num_experts = " + num(m.moe.num_experts));
        else if (p.dp % p.ep != 0)
            c.fail("ep", "ep = " + num(p.ep) + " must divide dp = " + num(p.dp) +
                             " (experts are sharded inside the data-parallel group)");
    }
    if (t.zero_stage >= 2 && p.pp > 1)
        c.fail("zero", "zero = " + num(t.zero_stage) + " cannot be combined with pp = " + num(p.pp) +
                           " (DeepSpeed and Megatron allow only ZeRO-1 with pipeline parallelism)");
    if (t.param_offload != Offload::None && t.zero_stage != 3)
        c.fail("param_offload", "param_offload = \"" + std::string(to_string(t.param_offload)) +
                                    "\" needs zero = 3 (ZeRO-Infinity), got zero = " + num(t.zero_stage));
    if (t.optimizer_offload != Offload::None && t.zero_stage == 0)
        c.fail("optimizer_offload", "optimizer_offload = \"" + std::string(to_string(t.optimizer_offload)) +
                                        "\" needs zero >= 1 (ZeRO-Offload), got zero = 0");
    if (t.method != Method::Full) {
        c.at_least("lora_rank", t.lora.rank, 1);
        if (t.lora.targets == 0) c.fail("lora_targets", "lora_targets must name at least one module");
    }
    if (t.precision == Precision::FP8Mixed && s.cluster.gpu.fp8_flops <= 0)
        c.fail("precision", "precision = \"fp8-mixed\" needs FP8 tensor cores; " + s.cluster.gpu.name +
                                " has none");
    if (m.position == PositionKind::Learned && t.seq_len > m.max_seq_len)
        c.fail("seq_len", "seq_len = " + num(t.seq_len) + " exceeds max_seq_len = " + num(m.max_seq_len) +
                              " of " + m.name + " (learned position embeddings cannot extrapolate)");
    if (s.cluster.gpu.capacity_bytes <= 0)
        c.fail("gpu", "GPU " + s.cluster.gpu.id + " has no memory capacity");
    return c.out;
}

}  // namespace trainplan
