#include <algorithm>
#include <cctype>

#include "toml_reader.hpp"
#include "trainplan/io.hpp"
#include "trainplan/units.hpp"

namespace trainplan {

using detail::TomlReader;

// ---------------------------------------------------------------- enums

namespace {
std::string lower(std::string_view s) {
    std::string r(s);
    for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::replace(r.begin(), r.end(), '_', '-');
    return r;
}
}  // namespace

std::optional<Method> parse_method(std::string_view s) {
    const auto v = lower(s);
    if (v == "full") return Method::Full;
    if (v == "lora") return Method::LoRA;
    if (v == "qlora") return Method::QLoRA;
    return std::nullopt;
}
std::optional<Precision> parse_precision(std::string_view s) {
    const auto v = lower(s);
    if (v == "fp32") return Precision::FP32;
    if (v == "fp16-mixed" || v == "fp16") return Precision::FP16Mixed;
    if (v == "bf16-mixed") return Precision::BF16Mixed;
    if (v == "bf16" || v == "bf16-true" || v == "bf16-pure") return Precision::BF16;
    if (v == "fp8-mixed" || v == "fp8") return Precision::FP8Mixed;
    return std::nullopt;
}
std::optional<OptimizerKind> parse_optimizer(std::string_view s) {
    const auto v = lower(s);
    if (v == "adamw" || v == "adam") return OptimizerKind::AdamW;
    if (v == "adamw-8bit" || v == "adam-8bit" || v == "adamw8bit") return OptimizerKind::AdamW8bit;
    if (v == "sgd") return OptimizerKind::SGD;
    if (v == "sgd-momentum") return OptimizerKind::SGDMomentum;
    if (v == "adafactor") return OptimizerKind::Adafactor;
    if (v == "lion") return OptimizerKind::Lion;
    return std::nullopt;
}
std::optional<Framework> parse_framework(std::string_view s) {
    const auto v = lower(s);
    if (v == "deepspeed") return Framework::DeepSpeed;
    if (v == "megatron") return Framework::Megatron;
    if (v == "pytorch-amp" || v == "amp") return Framework::PyTorchAMP;
    return std::nullopt;
}
std::optional<Recompute> parse_recompute(std::string_view s) {
    const auto v = lower(s);
    if (v == "none") return Recompute::None;
    if (v == "selective") return Recompute::Selective;
    if (v == "full") return Recompute::Full;
    return std::nullopt;
}
std::optional<Offload> parse_offload(std::string_view s) {
    const auto v = lower(s);
    if (v == "none") return Offload::None;
    if (v == "cpu") return Offload::CPU;
    if (v == "nvme") return Offload::NVMe;
    return std::nullopt;
}
std::optional<Schedule> parse_schedule(std::string_view s) {
    const auto v = lower(s);
    if (v == "1f1b") return Schedule::OneF1B;
    if (v == "interleaved") return Schedule::Interleaved;
    if (v == "gpipe") return Schedule::GPipe;
    return std::nullopt;
}
std::optional<QuantType> parse_quant(std::string_view s) {
    const auto v = lower(s);
    if (v == "nf4") return QuantType::NF4;
    if (v == "fp4") return QuantType::FP4;
    return std::nullopt;
}
std::optional<FsdpStrategy> parse_fsdp(std::string_view s) {
    const auto v = lower(s);
    if (v == "none") return FsdpStrategy::None;
    if (v == "full-shard") return FsdpStrategy::FullShard;
    if (v == "shard-grad-op") return FsdpStrategy::ShardGradOp;
    if (v == "hybrid-shard") return FsdpStrategy::HybridShard;
    if (v == "no-shard") return FsdpStrategy::NoShard;
    return std::nullopt;
}
std::optional<AttentionKernel> parse_attention_kernel(std::string_view s) {
    const auto v = lower(s);
    if (v == "flash1" || v == "flash-attn-1") return AttentionKernel::Flash1;
    if (v == "flash2" || v == "sdpa" || v == "flash-attn-2") return AttentionKernel::Flash2;
    if (v == "flash3" || v == "cudnn" || v == "flash-attn-3") return AttentionKernel::Flash3;
    return std::nullopt;
}
std::optional<unsigned> parse_lora_targets(std::string_view s) {
    unsigned mask = 0;
    std::string item;
    const std::string text = lower(s) + ",";
    for (char c : text) {
        if (c != ',') { if (!std::isspace(static_cast<unsigned char>(c))) item += c; continue; }
        if (item.empty()) continue;
        if (item == "all" || item == "all-linear") mask |= kLoraAll;
        else if (item == "attention") mask |= kLoraAttention;
        else if (item == "mlp") mask |= kLoraMlp;
        else if (item == "q" || item == "q-proj" || item == "query") mask |= kLoraQ;
        else if (item == "k" || item == "k-proj" || item == "key") mask |= kLoraK;
        else if (item == "v" || item == "v-proj" || item == "value") mask |= kLoraV;
        else if (item == "o" || item == "o-proj" || item == "out" || item == "projection") mask |= kLoraO;
        else if (item == "gate" || item == "gate-proj") mask |= kLoraGate;
        else if (item == "up" || item == "up-proj" || item == "fc1") mask |= kLoraUp;
        else if (item == "down" || item == "down-proj" || item == "fc2") mask |= kLoraDown;
        else return std::nullopt;
        item.clear();
    }
    if (mask == 0) return std::nullopt;
    return mask;
}

const char* to_string(PresetKind k) {
    switch (k) {
        case PresetKind::Model: return "model";
        case PresetKind::Gpu: return "GPU";
        case PresetKind::Link: return "link";
        case PresetKind::Node: return "node";
    }
    return "?";
}

// ---------------------------------------------------------------- helpers

// closest_names() lives in suggest.cpp.

std::vector<Diagnostic> check_model(const ModelSpec& m) {
    std::vector<Diagnostic> d;
    auto fail = [&](const std::string& key, const std::string& msg) { d.push_back({"", 0, 0, key, msg}); };
    if (m.num_heads > 0 && m.num_kv_heads > 0 && m.num_heads % m.num_kv_heads != 0)
        fail("num_kv_heads", "num_kv_heads = " + std::to_string(m.num_kv_heads) + " must divide num_heads = " + std::to_string(m.num_heads));
    if (m.num_kv_heads > m.num_heads)
        fail("num_kv_heads", "num_kv_heads = " + std::to_string(m.num_kv_heads) + " must not exceed num_heads = " + std::to_string(m.num_heads));
    if (m.is_moe()) {
        if (m.moe.top_k < 1 || m.moe.top_k > m.moe.num_experts)
            fail("top_k", "top_k = " + std::to_string(m.moe.top_k) + " must be between 1 and num_experts = " + std::to_string(m.moe.num_experts));
    }
    if (m.position == PositionKind::Learned && m.max_seq_len <= 0)
        fail("max_seq_len", "learned positions need max_seq_len >= 1");
    return d;
}

// ---------------------------------------------------------------- models

namespace {

constexpr const char* kActivations = "swiglu, geglu, gelu, relu";
constexpr const char* kNorms = "rmsnorm, layernorm";
constexpr const char* kPositions = "rope, learned, alibi, none";

std::optional<Activation> parse_activation(std::string_view s) {
    const auto v = lower(s);
    if (v == "swiglu" || v == "silu-glu") return Activation::SwiGLU;
    if (v == "geglu") return Activation::GeGLU;
    if (v == "gelu") return Activation::GELU;
    if (v == "relu") return Activation::ReLU;
    return std::nullopt;
}
std::optional<NormKind> parse_norm(std::string_view s) {
    const auto v = lower(s);
    if (v == "rmsnorm") return NormKind::RMSNorm;
    if (v == "layernorm") return NormKind::LayerNorm;
    return std::nullopt;
}
std::optional<PositionKind> parse_position(std::string_view s) {
    const auto v = lower(s);
    if (v == "rope") return PositionKind::RoPE;
    if (v == "learned") return PositionKind::Learned;
    if (v == "alibi") return PositionKind::ALiBi;
    if (v == "none") return PositionKind::None;
    return std::nullopt;
}

constexpr std::int64_t kMaxDim = std::int64_t{1} << 22;

// Reads architecture keys of a model table into m; `section` names it in messages.
void read_model_keys(TomlReader& r, ModelSpec& m, std::vector<Diagnostic>& errs, const std::string& file) {
    if (auto v = r.string("name")) m.name = *v;
    if (auto v = r.string("source")) m.source = *v;
    if (auto v = r.string("family")) m.family = *v;
    r.string("notes");
    if (auto v = r.integer("num_layers", 1, 100000, true)) m.num_layers = *v;
    if (auto v = r.integer("hidden_size", 1, kMaxDim, true)) m.hidden = *v;
    if (auto v = r.integer("num_heads", 1, 65536, true)) m.num_heads = *v;
    m.num_kv_heads = m.num_heads;
    if (auto v = r.integer("num_kv_heads", 1, 65536)) m.num_kv_heads = *v;
    if (auto v = r.integer("head_dim", 1, 65536)) m.head_dim = *v;
    if (auto v = r.integer("ffn_hidden_size", 1, kMaxDim, true)) m.ffn = *v;
    if (auto v = r.integer("vocab_size", 1, std::int64_t{1} << 24, true)) m.vocab = *v;
    if (auto v = r.integer("max_seq_len", 1, std::int64_t{1} << 26, true)) m.max_seq_len = *v;
    if (auto v = r.choice<Activation>("activation", parse_activation, kActivations)) m.activation = *v;
    if (auto v = r.choice<NormKind>("norm", parse_norm, kNorms)) m.norm = *v;
    m.norm_bias = m.norm == NormKind::LayerNorm;
    if (auto v = r.boolean("norm_bias")) m.norm_bias = *v;
    if (auto v = r.integer("norms_per_layer", 1, 4)) m.norms_per_layer = static_cast<int>(*v);
    if (auto v = r.boolean("qkv_bias")) m.qkv_bias = *v;
    if (auto v = r.boolean("out_bias")) m.out_bias = *v;
    if (auto v = r.boolean("mlp_bias")) m.mlp_bias = *v;
    if (auto v = r.boolean("lm_head_bias")) m.lm_head_bias = *v;
    if (auto v = r.boolean("tied_embeddings")) m.tied_embeddings = *v;
    if (auto v = r.choice<PositionKind>("position", parse_position, kPositions)) m.position = *v;
    if (auto v = r.boolean("parallel_block")) m.parallel_block = *v;
    if (auto v = r.boolean("embedding_norm")) m.embedding_norm = *v;
    if (auto v = r.boolean("final_norm")) m.final_norm = *v;
    if (auto v = r.number("dropout", 0.0, 0.99)) m.dropout = *v;
    if (auto v = r.integer("reference_params", 1, std::int64_t{1} << 50)) m.reference_params = *v;
    if (const toml::table* moe = r.subtable("moe")) {
        TomlReader mr(*moe, file, "[moe]", errs);
        if (auto v = mr.integer("num_experts", 1, 65536, true)) m.moe.num_experts = static_cast<int>(*v);
        if (auto v = mr.integer("top_k", 1, 65536, true)) m.moe.top_k = static_cast<int>(*v);
        if (auto v = mr.integer("shared_experts", 0, 65536)) m.moe.shared_experts = static_cast<int>(*v);
        m.moe.expert_ffn = m.ffn;
        if (auto v = mr.integer("expert_ffn_hidden_size", 1, kMaxDim)) m.moe.expert_ffn = *v;
        m.moe.shared_expert_ffn = m.moe.expert_ffn;
        if (auto v = mr.integer("shared_expert_ffn_hidden_size", 1, kMaxDim)) m.moe.shared_expert_ffn = *v;
        mr.finish();
    }
    if (m.head_dim == 0 && m.num_heads > 0) {
        if (m.hidden % m.num_heads != 0 && !r.has("head_dim"))
            r.error("num_heads", "num_heads = " + std::to_string(m.num_heads) + " must divide hidden_size = " +
                                     std::to_string(m.hidden) + " (or set head_dim)");
        m.head_dim = m.hidden / m.num_heads;
    }
}

// Semantic model checks, located at their keys.
void check_model_at(TomlReader& r, const ModelSpec& m) {
    for (const Diagnostic& d : check_model(m)) r.error(d.key, d.message);
}

}  // namespace

Result<ModelSpec> parse_model_toml(std::string_view text, const std::string& filename, const std::string& id) {
    toml::table doc;
    if (auto err = detail::parse_document(text, filename, doc)) return *err;
    std::vector<Diagnostic> errs;
    TomlReader r(doc, filename, "model preset", errs);
    ModelSpec m;
    m.id = id;
    read_model_keys(r, m, errs, filename);
    r.finish();
    if (errs.empty()) check_model_at(r, m);
    if (!errs.empty()) return Error(errs);
    if (m.name.empty()) m.name = id;
    return m;
}

// ---------------------------------------------------------------- hardware

Result<GpuSpec> parse_gpu_toml(std::string_view text, const std::string& filename, const std::string& id) {
    toml::table doc;
    if (auto err = detail::parse_document(text, filename, doc)) return *err;
    std::vector<Diagnostic> errs;
    TomlReader r(doc, filename, "GPU preset", errs);
    GpuSpec g;
    g.id = id;
    if (auto v = r.string("name", true)) g.name = *v;
    if (auto v = r.string("vendor")) g.vendor = *v;
    if (auto v = r.string("architecture")) g.architecture = *v;
    if (auto v = r.string("source", true)) g.source = *v;
    if (auto v = r.string("notes")) g.notes = *v;
    if (auto v = r.boolean("consumer")) g.consumer = *v;
    if (auto v = r.number("memory_gb", 0.1, 1e6)) g.memory_gb_marketed = *v;
    if (auto v = r.number("memory_gib", 0.1, 1e6, true)) g.capacity_bytes = *v * units::GiB;
    if (auto v = r.number("memory_bandwidth_gb_s", 1, 1e7, true)) g.memory_bandwidth_Bps = *v * units::GBps;
    auto tf = [&](const char* key, double& out) { if (auto v = r.number(key, 0.001, 1e6)) out = *v * units::TFLOPS; };
    tf("fp32_tflops", g.fp32_flops);
    tf("tf32_tflops", g.tf32_flops);
    tf("bf16_tflops", g.bf16_flops);
    tf("fp16_tflops", g.fp16_flops);
    tf("fp8_tflops", g.fp8_flops);
    if (auto v = r.number("tdp_w", 1, 1e5)) g.tdp_w = *v;
    if (auto v = r.integer("pcie_gen", 1, 7)) g.pcie_gen = static_cast<int>(*v);
    if (auto v = r.integer("pcie_lanes", 1, 32)) g.pcie_lanes = static_cast<int>(*v);
    if (auto v = r.string("nvlink")) g.nvlink = *v;
    g.p2p = !g.consumer;
    if (auto v = r.boolean("p2p")) g.p2p = *v;
    if (auto v = r.number("matmul_efficiency", 0.01, 1.0)) g.matmul_efficiency = *v;
    if (auto v = r.number("memory_bandwidth_efficiency", 0.01, 1.0)) g.memory_bandwidth_efficiency = *v;
    if (auto v = r.number("price_usd", 0, 1e9)) g.price_usd = *v;
    if (auto v = r.integer("sm_count", 1, 100000)) g.sm_count = static_cast<int>(*v);
    if (auto v = r.number("boost_clock_mhz", 100, 10000)) g.boost_clock_mhz = *v;
    r.finish();
    if (errs.empty() && g.fp32_flops <= 0 && g.bf16_flops <= 0 && g.fp16_flops <= 0)
        r.error("bf16_tflops", "a GPU preset needs at least one of fp32_tflops, bf16_tflops, fp16_tflops");
    if (!errs.empty()) return Error(errs);
    return g;
}

Result<LinkSpec> parse_link_toml(std::string_view text, const std::string& filename, const std::string& id) {
    toml::table doc;
    if (auto err = detail::parse_document(text, filename, doc)) return *err;
    std::vector<Diagnostic> errs;
    TomlReader r(doc, filename, "link preset", errs);
    LinkSpec l;
    l.id = id;
    if (auto v = r.string("name", true)) l.name = *v;
    if (auto v = r.string("source", true)) l.source = *v;
    if (auto v = r.string("notes")) l.notes = *v;
    auto kind = r.choice<LinkKind>("kind", [](std::string_view s) -> std::optional<LinkKind> {
        const auto v = lower(s);
        if (v == "pcie") return LinkKind::PCIe;
        if (v == "nvlink") return LinkKind::NVLink;
        if (v == "nvswitch") return LinkKind::NVSwitch;
        if (v == "infiniband") return LinkKind::InfiniBand;
        if (v == "roce") return LinkKind::RoCE;
        if (v == "ethernet") return LinkKind::Ethernet;
        if (v == "infinity-fabric") return LinkKind::InfinityFabric;
        return std::nullopt;
    }, "pcie, nvlink, nvswitch, infiniband, roce, ethernet, infinity_fabric", true);
    if (kind) l.kind = *kind;
    if (auto v = r.number("bandwidth_gb_s", 0.001, 1e6, true)) l.bandwidth_Bps = *v * units::GBps;
    if (auto v = r.number("efficiency", 0.01, 1.5)) l.efficiency = *v;
    if (auto v = r.number("latency_us", 0, 1e6)) l.latency_s = *v * units::us;
    if (auto v = r.boolean("p2p")) l.p2p = *v;
    r.finish();
    if (!errs.empty()) return Error(errs);
    return l;
}

Result<NodeSpec> parse_node_toml(std::string_view text, const std::string& filename, const std::string& id) {
    toml::table doc;
    if (auto err = detail::parse_document(text, filename, doc)) return *err;
    std::vector<Diagnostic> errs;
    TomlReader r(doc, filename, "node preset", errs);
    NodeSpec n;
    n.id = id;
    if (auto v = r.string("name", true)) n.name = *v;
    if (auto v = r.string("source", true)) n.source = *v;
    if (auto v = r.string("notes")) n.notes = *v;
    if (auto v = r.string("gpu", true)) n.gpu = *v;
    if (auto v = r.integer("gpus_per_node", 1, 4096, true)) n.gpus_per_node = static_cast<int>(*v);
    if (auto v = r.string("intra_node", true)) n.intra_node = *v;
    if (auto v = r.string("inter_node")) n.inter_node = *v;
    if (auto v = r.integer("nics_per_node", 1, 4096)) n.nics_per_node = static_cast<int>(*v);
    if (auto v = r.number("system_power_kw", 0, 1e5)) n.system_power_kw = *v;
    if (auto v = r.number("price_usd", 0, 1e10)) n.price_usd = *v;
    r.finish();
    if (!errs.empty()) return Error(errs);
    return n;
}

// ---------------------------------------------------------------- scenarios

void ScenarioInput::merge(const ScenarioInput& o) {
#define TP_MERGE(f) if (o.f) f = o.f;
    TP_MERGE(model) TP_MERGE(model_inline) TP_MERGE(gpu) TP_MERGE(node) TP_MERGE(intra_node) TP_MERGE(inter_node)
    TP_MERGE(gpus) TP_MERGE(gpus_per_node) TP_MERGE(nics_per_node) TP_MERGE(method) TP_MERGE(lora_rank)
    TP_MERGE(lora_alpha) TP_MERGE(lora_dropout) TP_MERGE(lora_targets) TP_MERGE(quant) TP_MERGE(double_quant)
    TP_MERGE(paged_optimizer) TP_MERGE(precision) TP_MERGE(optimizer) TP_MERGE(framework) TP_MERGE(zero)
    TP_MERGE(fsdp) TP_MERGE(optimizer_offload) TP_MERGE(param_offload) TP_MERGE(recompute) TP_MERGE(flash_attention) TP_MERGE(attention_kernel) TP_MERGE(tp_comm_overlap)
    TP_MERGE(seq_len) TP_MERGE(micro_batch) TP_MERGE(grad_accum) TP_MERGE(global_batch) TP_MERGE(tp) TP_MERGE(pp)
    TP_MERGE(dp) TP_MERGE(ep) TP_MERGE(vp) TP_MERGE(sequence_parallel) TP_MERGE(schedule)
    TP_MERGE(framework_overhead_gib) TP_MERGE(fragmentation)
#undef TP_MERGE
    if (o.model || o.model_inline) {
        if (!o.model) model.reset();
        if (!o.model_inline) model_inline.reset();
    }
    for (const auto& [k, v] : o.origin) origin[k] = v;
}

Result<ScenarioInput> parse_scenario_toml(std::string_view text, const std::string& filename, const std::vector<std::string>& extra_sections) {
    toml::table doc;
    if (auto err = detail::parse_document(text, filename, doc)) return *err;
    std::vector<Diagnostic> errs;
    ScenarioInput in;
    TomlReader top(doc, filename, "scenario", errs);
    auto note = [&](TomlReader& r, const std::string& key) {
        if (r.has(key)) in.origin[key] = r.origin(key);
    };

    if (const toml::table* t = top.subtable("model")) {
        TomlReader r(*t, filename, "[model]", errs);
        auto preset = r.string("preset");
        auto file = r.string("file");
        const bool inline_keys = r.has("num_layers") || r.has("hidden_size");
        if ((preset ? 1 : 0) + (file ? 1 : 0) + (inline_keys ? 1 : 0) > 1)
            r.error(preset ? "preset" : "file", "[model] takes one of: preset, file, or inline architecture keys");
        if (preset) { in.model = *preset; note(r, "preset"); in.origin["model"] = r.origin("preset"); }
        if (file) { in.model = *file; in.origin["model"] = r.origin("file"); }
        if (inline_keys) {
            ModelSpec m;
            m.id = filename + " [model]";
            read_model_keys(r, m, errs, filename);
            check_model_at(r, m);
            if (m.name.empty()) m.name = "inline model";
            in.model_inline = m;
            in.origin["model"] = r.origin("num_layers");
        }
        r.finish({"preset", "file"});
        if (!preset && !file && !inline_keys) r.error("preset", "[model] needs preset, file, or inline architecture keys");
    }
    if (const toml::table* t = top.subtable("hardware")) {
        TomlReader r(*t, filename, "[hardware]", errs);
        for (const char* k : {"gpu", "node", "intra_node", "inter_node"}) note(r, k);
        if (auto v = r.string("gpu")) in.gpu = *v;
        if (auto v = r.string("node")) in.node = *v;
        if (auto v = r.string("intra_node")) in.intra_node = *v;
        if (auto v = r.string("inter_node")) in.inter_node = *v;
        for (const char* k : {"gpus", "gpus_per_node", "nics_per_node"}) note(r, k);
        if (auto v = r.integer("gpus", 1, 1 << 20)) in.gpus = static_cast<int>(*v);
        if (auto v = r.integer("gpus_per_node", 1, 4096)) in.gpus_per_node = static_cast<int>(*v);
        if (auto v = r.integer("nics_per_node", 1, 4096)) in.nics_per_node = static_cast<int>(*v);
        r.finish();
    }
    if (const toml::table* t = top.subtable("training")) {
        TomlReader r(*t, filename, "[training]", errs);
        for (const auto& [k, n] : *t) note(r, std::string(k.str()));
        in.method = r.choice<Method>("method", parse_method, "full, lora, qlora");
        in.precision = r.choice<Precision>("precision", parse_precision, "fp32, fp16-mixed, bf16-mixed, bf16, fp8-mixed");
        in.optimizer = r.choice<OptimizerKind>("optimizer", parse_optimizer, "adamw, adamw-8bit, sgd, sgd-momentum, adafactor, lion");
        in.framework = r.choice<Framework>("framework", parse_framework, "deepspeed, megatron, pytorch-amp");
        if (auto v = r.integer("zero", 0, 3)) in.zero = static_cast<int>(*v);
        in.fsdp = r.choice<FsdpStrategy>("fsdp", parse_fsdp, "none, full-shard, shard-grad-op, hybrid-shard, no-shard");
        in.optimizer_offload = r.choice<Offload>("optimizer_offload", parse_offload, "none, cpu, nvme");
        in.param_offload = r.choice<Offload>("param_offload", parse_offload, "none, cpu, nvme");
        in.recompute = r.choice<Recompute>("recompute", parse_recompute, "none, selective, full");
        in.flash_attention = r.boolean("flash_attention");
        in.attention_kernel = r.choice<AttentionKernel>("attention_kernel", parse_attention_kernel, "flash1, flash2, flash3");
        if (auto v = r.integer("seq_len", 1, 16 * 1024 * 1024)) in.seq_len = *v;
        if (auto v = r.integer("micro_batch", 1, 1 << 20)) in.micro_batch = *v;
        if (auto v = r.integer("grad_accum", 1, 1 << 24)) in.grad_accum = *v;
        if (auto v = r.integer("global_batch", 1, std::int64_t{1} << 40)) in.global_batch = *v;
        if (auto v = r.integer("lora_rank", 1, 65536)) in.lora_rank = static_cast<int>(*v);
        if (auto v = r.number("lora_alpha", 0, 1e6)) in.lora_alpha = *v;
        if (auto v = r.number("lora_dropout", 0, 0.99)) in.lora_dropout = *v;
        if (auto v = r.string("lora_targets")) {
            in.lora_targets = parse_lora_targets(*v);
            if (!in.lora_targets) r.error("lora_targets", "lora_targets = \"" + *v + "\" must list modules from: q, k, v, o, gate, up, down (or all, attention, mlp)");
        }
        in.quant = r.choice<QuantType>("quant", parse_quant, "nf4, fp4");
        in.double_quant = r.boolean("double_quant");
        in.paged_optimizer = r.boolean("paged_optimizer");
        if (auto v = r.number("framework_overhead_gib", 0, 1024)) in.framework_overhead_gib = *v;
        if (auto v = r.number("fragmentation", 0, 1)) in.fragmentation = *v;
        r.finish();
    }
    if (const toml::table* t = top.subtable("parallel")) {
        TomlReader r(*t, filename, "[parallel]", errs);
        for (const auto& [k, n] : *t) note(r, std::string(k.str()));
        if (auto v = r.integer("tp", 1, 1 << 16)) in.tp = static_cast<int>(*v);
        if (auto v = r.integer("pp", 1, 1 << 16)) in.pp = static_cast<int>(*v);
        if (auto v = r.integer("dp", 1, 1 << 20)) in.dp = static_cast<int>(*v);
        if (auto v = r.integer("ep", 1, 1 << 16)) in.ep = static_cast<int>(*v);
        if (auto v = r.integer("vp", 1, 1024)) in.vp = static_cast<int>(*v);
        in.sequence_parallel = r.boolean("sequence_parallel");
        in.tp_comm_overlap = r.boolean("tp_comm_overlap");
        in.schedule = r.choice<Schedule>("schedule", parse_schedule, "1f1b, interleaved, gpipe");
        r.finish();
    }
    for (const auto& k : extra_sections) top.ignore(k);
    top.finish();
    if (!errs.empty()) return Error(errs);
    return in;
}

Result<GoalInput> parse_goal_toml(std::string_view text, const std::string& filename) {
    auto sc = parse_scenario_toml(text, filename, {"goal", "rent", "price"});
    if (!sc) return sc.error();
    toml::table doc;
    if (auto err = detail::parse_document(text, filename, doc)) return *err;
    std::vector<Diagnostic> errs;
    GoalInput g;
    g.scenario = *sc;
    TomlReader top(doc, filename, "goal file", errs);
    if (const toml::table* t = top.subtable("goal")) {
        TomlReader r(*t, filename, "[goal]", errs);
        if (auto v = r.number("tokens", 1, 1e18, true)) g.tokens = *v;
        if (auto v = r.number("deadline_days", 0.001, 36500)) g.deadline_days = *v;
        if (auto v = r.number("budget_usd", 0, 1e13)) g.budget_usd = *v;
        if (auto v = r.integer("max_gpus", 1, 1 << 20)) g.max_gpus = static_cast<int>(*v);
        if (auto v = r.number("electricity_usd_per_kwh", 0, 100)) g.electricity = *v;
        if (auto v = r.number("pue", 1, 5)) g.pue = *v;
        if (auto v = r.number("amortization_years", 0.1, 50)) g.amortization_years = *v;
        r.ignore("candidates");
        if (const toml::node* n = t->get("candidates")) {
            const toml::array* arr = n->as_array();
            if (!arr) r.error("candidates", "candidates must be an array of GPU preset names");
            else
                for (const auto& e : *arr) {
                    if (auto sv = e.value<std::string>()) g.candidates.push_back(*sv);
                    else r.error("candidates", "candidates must be an array of GPU preset names");
                }
        }
        r.finish();
    } else {
        errs.push_back({filename, 0, 0, "goal", "missing required table [goal] (tokens, deadline_days, ...)"});
    }
    for (const char* section : {"rent", "price"}) {
        if (const toml::table* t = top.subtable(section)) {
            for (const auto& [k, node] : *t) {
                const std::string key(k.str());
                TomlReader r(*t, filename, std::string("[") + section + "]", errs);
                if (auto v = r.number(key, 0, 1e8)) (std::string(section) == "rent" ? g.rent : g.price)[key] = *v;
            }
        }
    }
    if (!errs.empty()) return Error(errs);
    return g;
}

// ---------------------------------------------------------------- resolving

namespace {

Diagnostic unknown_preset(PresetLookup& lookup, PresetKind kind, const std::string& name, const std::string& flag) {
    std::string msg = std::string("unknown ") + to_string(kind) + " preset \"" + name + "\"";
    const auto near = closest_names(name, lookup.names(kind));
    if (!near.empty()) {
        msg += "; did you mean ";
        for (size_t i = 0; i < near.size(); ++i) msg += (i ? ", \"" : "\"") + near[i] + "\"";
        msg += "?";
    }
    const char* cmd = kind == PresetKind::Model ? "models" : kind == PresetKind::Gpu ? "gpus" : kind == PresetKind::Link ? "links" : "nodes";
    msg += std::string(" (run 'trainplan ") + cmd + "' for the list)";
    return {flag.rfind("--", 0) == 0 ? "" : "", 0, 0, flag, msg};
}

template <class T, class P>
Result<T> load_preset(PresetLookup& lookup, PresetKind kind, const std::string& name, const std::string& flag, P parse) {
    auto src = lookup.find(kind, name);
    if (!src) return unknown_preset(lookup, kind, name, flag);
    return parse(src->text, src->filename, src->id);
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && std::equal(suffix.rbegin(), suffix.rend(), s.rbegin(),
                                                   [](char a, char b) { return std::tolower(a) == std::tolower(b); });
}

}  // namespace

Result<ModelSpec> load_model(PresetLookup& lookup, const std::string& spec, const std::string& flag) {
    const bool is_path = spec.find('/') != std::string::npos || ends_with(spec, ".toml") || ends_with(spec, ".json");
    if (is_path) {
        std::string why;
        auto src = lookup.read_file(spec, why);
        if (!src && looks_like_hub_id(spec)) {
            std::string hub_why;
            src = lookup.hub_model(spec, hub_why);
            if (!src) return Diagnostic{"", 0, 0, flag, hub_why};
            if (!ends_with(src->filename, ".json")) return parse_model_toml(src->text, src->filename, src->id);
            return parse_hf_config(src->text, src->filename, src->id);
        }
        if (!src) return Diagnostic{spec, 0, 0, flag, "cannot read model file: " + why};
        std::string stem = spec.substr(spec.find_last_of('/') + 1);
        if (ends_with(spec, ".json")) return parse_hf_config(src->text, src->filename, stem);
        return parse_model_toml(src->text, src->filename, stem.substr(0, stem.size() - 5));
    }
    if (auto src = lookup.find(PresetKind::Model, spec)) return parse_model_toml(src->text, src->filename, src->id);
    if (is_size_shorthand(spec)) return model_from_shorthand(spec);
    return unknown_preset(lookup, PresetKind::Model, spec, flag);
}
Result<GpuSpec> load_gpu(PresetLookup& lookup, const std::string& name, const std::string& flag) {
    return load_preset<GpuSpec>(lookup, PresetKind::Gpu, name, flag, parse_gpu_toml);
}
Result<LinkSpec> load_link(PresetLookup& lookup, const std::string& name, const std::string& flag) {
    return load_preset<LinkSpec>(lookup, PresetKind::Link, name, flag, parse_link_toml);
}
Result<NodeSpec> load_node(PresetLookup& lookup, const std::string& name, const std::string& flag) {
    return load_preset<NodeSpec>(lookup, PresetKind::Node, name, flag, parse_node_toml);
}

Result<Scenario> resolve_scenario(const ScenarioInput& in, PresetLookup& lookup) {
    std::vector<Diagnostic> errs;
    // Diagnostics about a key point at where the key was set (file:line) or at its flag.
    auto locate = [&](Diagnostic d) {
        auto it = in.origin.find(d.key);
        if (d.file.empty() && it != in.origin.end()) {
            d.file = it->second.file;
            d.line = it->second.line;
            d.column = it->second.column;
        } else if (d.file.empty() && !d.key.empty() && d.key.rfind("--", 0) != 0) {
            std::string flag = d.key;
            std::replace(flag.begin(), flag.end(), '_', '-');
            d.key = "--" + flag;
        }
        return d;
    };
    auto take = [&](auto&& result) {
        if (!result) for (const auto& d : result.error().diagnostics) errs.push_back(locate(d));
        return std::forward<decltype(result)>(result);
    };

    Scenario s;
    // ---- model
    if (in.model_inline) {
        s.model = *in.model_inline;
    } else if (in.model) {
        auto m = take(load_model(lookup, *in.model, "model"));
        if (m) s.model = *m;
    } else {
        errs.push_back({"", 0, 0, "model", "no model given (a preset name, size shorthand like 7b, TOML file or config.json)"});
    }

    // ---- hardware: a node preset supplies defaults for GPU and links
    std::optional<NodeSpec> node;
    if (in.node) {
        auto n = take(load_node(lookup, *in.node, "node"));
        if (n) node = *n;
    }
    std::string gpu_name = in.gpu ? *in.gpu : node ? node->gpu : "";
    if (gpu_name.empty()) {
        errs.push_back({"", 0, 0, "gpu", "no GPU given (e.g. --gpu rtx-4090; 'trainplan gpus' lists presets)"});
    } else {
        auto g = take(load_gpu(lookup, gpu_name, "gpu"));
        if (g) s.cluster.gpu = *g;
    }
    s.cluster.num_gpus = in.gpus.value_or(1);
    const int default_per_node = node ? node->gpus_per_node : std::min(s.cluster.num_gpus, 8);
    s.cluster.gpus_per_node = in.gpus_per_node.value_or(default_per_node);
    s.cluster.nics_per_node = in.nics_per_node.value_or(node ? node->nics_per_node : 0);
    std::string intra = in.intra_node ? *in.intra_node : node ? node->intra_node : "";
    if (intra.empty() && !s.cluster.gpu.id.empty()) {
        // Default: the GPU's own NVLink if it has one, else PCIe of its generation.
        if (!s.cluster.gpu.nvlink.empty()) intra = s.cluster.gpu.nvlink;
        else {
            const int gen = s.cluster.gpu.pcie_gen > 0 ? std::min(s.cluster.gpu.pcie_gen, 5) : 4;
            intra = "pcie" + std::to_string(gen) + "-x16" + (s.cluster.gpu.p2p ? "" : "-nop2p");
        }
    }
    if (!intra.empty()) {
        auto l = take(load_link(lookup, intra, "intra_node"));
        if (l) s.cluster.intra_node = *l;
    }
    // Default fabric between nodes: the one DGX-class nodes of the GPU's
    // generation ship with (8 x HDR for Ampere, 8 x NDR for Hopper/Blackwell;
    // hardware-facts.toml dgx_a100 / dgx_h100 / dgx_b200).
    const std::string& arch = s.cluster.gpu.architecture;
    const std::string default_inter = (arch == "hopper" || arch == "blackwell") ? "ib-ndr" : "ib-hdr";
    std::string inter = in.inter_node ? *in.inter_node : node && !node->inter_node.empty() ? node->inter_node : default_inter;
    if (s.cluster.num_gpus > s.cluster.gpus_per_node || in.inter_node) {
        auto l = take(load_link(lookup, inter, "inter_node"));
        if (l) s.cluster.inter_node = *l;
    }

    // ---- training setup
    TrainingSetup& t = s.setup;
    if (in.method) t.method = *in.method;
    if (t.method == Method::QLoRA) t.precision = Precision::BF16;  // QLoRA recipe: bf16 compute, bf16 adapters
    if (in.precision) t.precision = *in.precision;
    if (in.optimizer) t.optimizer = *in.optimizer;
    if (in.framework) t.framework = *in.framework;
    if (in.lora_rank) t.lora.rank = *in.lora_rank;
    if (in.lora_alpha) t.lora.alpha = *in.lora_alpha;
    if (in.lora_dropout) t.lora.dropout = *in.lora_dropout;
    if (in.lora_targets) t.lora.targets = *in.lora_targets;
    if (in.quant) t.qlora.quant = *in.quant;
    if (in.double_quant) t.qlora.double_quant = *in.double_quant;
    if (in.paged_optimizer) t.qlora.paged_optimizer = *in.paged_optimizer;
    if (in.zero) t.zero_stage = *in.zero;
    if (in.fsdp) {
        t.fsdp = *in.fsdp;
        const int implied = t.fsdp == FsdpStrategy::ShardGradOp ? 2 : t.fsdp == FsdpStrategy::NoShard ? 0 : t.fsdp == FsdpStrategy::None ? t.zero_stage : 3;
        if (in.zero && *in.zero != implied)
            errs.push_back(locate({"", 0, 0, "zero", "zero = " + std::to_string(*in.zero) + " contradicts fsdp = \"" +
                                                         to_string(t.fsdp) + "\" (which shards like ZeRO-" + std::to_string(implied) + ")"}));
        t.zero_stage = implied;
    }
    if (in.optimizer_offload) t.optimizer_offload = *in.optimizer_offload;
    if (in.param_offload) t.param_offload = *in.param_offload;
    // The QLoRA recipe trains with gradient checkpointing (Dettmers et al. 2023;
    // peft.prepare_model_for_kbit_training enables it by default).
    if (t.method == Method::QLoRA) t.recompute = Recompute::Full;
    if (in.recompute) t.recompute = *in.recompute;
    if (in.flash_attention) t.flash_attention = *in.flash_attention;
    if (in.attention_kernel) t.attention_kernel = *in.attention_kernel;
    if (in.seq_len) t.seq_len = *in.seq_len;
    if (in.micro_batch) t.micro_batch = *in.micro_batch;
    if (in.framework_overhead_gib) t.framework_overhead_bytes = *in.framework_overhead_gib * units::GiB;
    if (in.fragmentation) t.fragmentation_fraction = *in.fragmentation;

    ParallelLayout& p = t.layout;
    if (in.tp) p.tp = *in.tp;
    if (in.pp) p.pp = *in.pp;
    if (in.ep) p.ep = *in.ep;
    if (in.vp) p.vp = *in.vp;
    if (in.sequence_parallel) p.sequence_parallel = *in.sequence_parallel;
    if (in.tp_comm_overlap) t.tp_comm_overlap = *in.tp_comm_overlap;
    if (in.schedule) p.schedule = *in.schedule;
    else if (p.vp > 1) p.schedule = Schedule::Interleaved;
    if (in.dp) {
        p.dp = *in.dp;
        if (!in.gpus) s.cluster.num_gpus = p.world();
    } else {
        const int mp = p.tp * p.pp;
        if (mp > 0 && s.cluster.num_gpus % mp == 0) p.dp = s.cluster.num_gpus / mp;
        else errs.push_back(locate({"", 0, 0, "gpus", "gpus = " + std::to_string(s.cluster.num_gpus) +
                                                          " must be a multiple of tp x pp = " + std::to_string(mp)}));
    }
    if (!in.gpus_per_node && !node) s.cluster.gpus_per_node = std::min(s.cluster.num_gpus, 8);

    // Batch: global batch = micro_batch x grad_accum x dp.
    const size_t errors_before_batch = errs.size();
    if (in.grad_accum) t.grad_accum = *in.grad_accum;
    if (in.global_batch) {
        const std::int64_t per_step = t.micro_batch * p.dp;
        if (in.grad_accum && *in.global_batch != per_step * t.grad_accum) {
            errs.push_back(locate({"", 0, 0, "global_batch", "global_batch = " + std::to_string(*in.global_batch) +
                                   " must equal micro_batch x grad_accum x dp = " + std::to_string(t.micro_batch) + " x " +
                                   std::to_string(t.grad_accum) + " x " + std::to_string(p.dp)}));
        } else if (per_step > 0 && *in.global_batch % per_step != 0) {
            errs.push_back(locate({"", 0, 0, "global_batch", "global_batch = " + std::to_string(*in.global_batch) +
                                   " must be a multiple of micro_batch x dp = " + std::to_string(t.micro_batch) + " x " +
                                   std::to_string(p.dp) + " = " + std::to_string(per_step)}));
        } else if (per_step > 0) {
            t.grad_accum = *in.global_batch / per_step;
        }
    }
    const size_t batch_errors = errs.size() - errors_before_batch;
    // Layout and model constraints are reported together with batch errors (all
    // a user has to fix at once), but only once model and hardware loaded.
    if (errs.size() > batch_errors) return Error(errs);
    for (const Diagnostic& d : check_model(s.model)) errs.push_back(locate(d));
    for (const Diagnostic& d : validate(s)) errs.push_back(locate(d));
    if (!errs.empty()) return Error(errs);
    return s;
}

}  // namespace trainplan
