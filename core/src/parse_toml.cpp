#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>

#include "text.hpp"
#include "toml_reader.hpp"
#include "trainplan/io.hpp"
#include "trainplan/moves.hpp"
#include "trainplan/policy.hpp"
#include "trainplan/schema.hpp"
#include "trainplan/time.hpp"
#include "trainplan/units.hpp"

namespace trainplan {

using detail::TomlReader;

// Enum spellings: enums.cpp (one table per enum).

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
    if (m.has_vision() && m.vision.image_size < m.vision.patch)
        fail("vision.image_size", "image_size = " + std::to_string(m.vision.image_size) + " must be at least patch_size = " +
                               std::to_string(m.vision.patch) + " (one patch per image at least)");
    if (m.position == PositionKind::Learned && m.max_seq_len <= 0)
        fail("max_seq_len", "learned positions need max_seq_len >= 1");
    // count_params is exact in 64-bit integers far beyond any real model, not for
    // every combination of in-range keys (100,000 layers of width 4M overflow it).
    // The same count in long double refuses what the integers cannot hold before
    // anything is counted: 1e15 parameters, about 2,500 times Llama 3.1 405B and
    // 9,000 times below where the integers overflow.
    using LD = long double;
    const LD params = count_params_approx(m).total;
    constexpr LD kMaxParams = 1e15L;
    if (params > kMaxParams) {
        char approx[32];
        std::snprintf(approx, sizeof approx, "%.3Lg", params);
        fail("num_layers", "the model would have about " + std::string(approx) + " parameters (num_layers = " + std::to_string(m.num_layers) +
                               ", hidden_size = " + std::to_string(m.hidden) + ", ffn_hidden_size = " + std::to_string(m.ffn) +
                               "), more than the 1e15 trainplan counts exactly");
    }
    return d;
}

// ---------------------------------------------------------------- models

namespace {

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
    if (auto v = r.choice<Activation>("activation", parse_enum<Activation>, enum_table<Activation>().allowed().c_str())) m.activation = *v;
    if (auto v = r.choice<NormKind>("norm", parse_enum<NormKind>, enum_table<NormKind>().allowed().c_str())) m.norm = *v;
    m.norm_bias = m.norm == NormKind::LayerNorm;
    if (auto v = r.boolean("norm_bias")) m.norm_bias = *v;
    if (auto v = r.integer("norms_per_layer", 1, 4)) m.norms_per_layer = static_cast<int>(*v);
    if (auto v = r.boolean("qkv_bias")) m.qkv_bias = *v;
    if (auto v = r.boolean("packed_qkv")) m.packed_qkv = *v;
    if (auto v = r.boolean("out_bias")) m.out_bias = *v;
    if (auto v = r.boolean("mlp_bias")) m.mlp_bias = *v;
    if (auto v = r.boolean("qk_norm")) m.qk_norm = *v;
    if (auto v = r.number("final_logit_softcap", 0.0, 1e6)) m.final_logit_softcap = *v;
    if (auto v = r.number("attn_logit_softcap", 0.0, 1e6)) m.attn_logit_softcap = *v;
    if (auto v = r.integer("sliding_window", 0, std::int64_t{1} << 26)) m.sliding_window = *v;
    if (auto v = r.integer("sliding_window_global_every", 0, 100000)) m.sliding_window_global_every = static_cast<int>(*v);
    if (auto v = r.boolean("lm_head_bias")) m.lm_head_bias = *v;
    if (auto v = r.boolean("tied_embeddings")) m.tied_embeddings = *v;
    if (auto v = r.choice<PositionKind>("position", parse_enum<PositionKind>, enum_table<PositionKind>().allowed().c_str())) m.position = *v;
    if (auto v = r.boolean("parallel_block")) m.parallel_block = *v;
    if (auto v = r.boolean("embedding_norm")) m.embedding_norm = *v;
    if (auto v = r.boolean("final_norm")) m.final_norm = *v;
    if (auto v = r.number("dropout", 0.0, 0.99)) m.dropout = *v;
    if (auto v = r.boolean("logits_upcast")) m.logits_upcast = *v;
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
    if (const toml::table* vis = r.subtable("vision")) {
        TomlReader vr(*vis, file, "[vision]", errs);
        if (auto v = vr.integer("num_layers", 1, 100000, true)) m.vision.num_layers = *v;
        if (auto v = vr.integer("hidden_size", 1, kMaxDim, true)) m.vision.hidden = *v;
        if (auto v = vr.integer("ffn_hidden_size", 1, kMaxDim, true)) m.vision.ffn = *v;
        if (auto v = vr.integer("patch_size", 1, 4096, true)) m.vision.patch = *v;
        if (auto v = vr.integer("image_size", 1, 1 << 20, true)) m.vision.image_size = *v;
        if (auto v = vr.integer("channels", 1, 64)) m.vision.channels = *v;
        if (auto v = vr.boolean("head")) m.vision.head = *v;
        vr.finish();
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
    if (auto v = r.number("memory_gib", 0.1, 1e6, true)) g.capacity_bytes = g.smi_total_bytes = *v * units::GiB;
    const auto cuda_total = r.number("cuda_memory_mib", 1, 1e9);
    if (cuda_total) g.capacity_bytes = *cuda_total * units::MiB;
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
    if (auto v = r.integer("nvlink_gpus", 2, 4096)) g.nvlink_gpus = static_cast<int>(*v);
    g.p2p = !g.consumer;
    if (auto v = r.boolean("p2p")) g.p2p = *v;
    // Above 1 where measured large GEMMs beat the spec sheet (GeForce cards boost past their rated clock).
    if (auto v = r.number("matmul_efficiency", 0.01, 1.5)) g.matmul_efficiency = *v;
    if (auto v = r.number("sgemm_efficiency", 0.01, 1.0)) g.sgemm_efficiency = *v;
    if (auto v = r.number("fp8_matmul_efficiency", 0.01, 1.0)) g.fp8_matmul_efficiency = *v;
    tf("sustained_matmul_tflops", g.sustained_matmul_flops);
    if (auto v = r.number("sustained_clock_mhz", 100, 10000)) g.sustained_clock_mhz = *v;
    if (auto v = r.number("memory_bandwidth_efficiency", 0.01, 1.0)) g.memory_bandwidth_efficiency = *v;
    if (auto v = r.number("price_usd", 0, 1e9)) g.price_usd = *v;
    if (auto v = r.integer("sm_count", 1, 100000)) g.sm_count = static_cast<int>(*v);
    if (auto v = r.number("boost_clock_mhz", 100, 10000)) g.boost_clock_mhz = *v;
    r.finish();
    if (errs.empty() && g.fp32_flops <= 0 && g.bf16_flops <= 0 && g.fp16_flops <= 0)
        r.error("bf16_tflops", "a GPU preset needs at least one of fp32_tflops, bf16_tflops, fp16_tflops");
    if (errs.empty() && g.fp8_matmul_efficiency > 0 && g.fp8_flops <= 0)
        r.error("fp8_matmul_efficiency", "fp8_matmul_efficiency needs the card's fp8_tflops (a GPU without FP8 tensor cores has no FP8 GEMM rate)");
    if (errs.empty() && g.sustained_matmul_flops > 0) {
        // The power-saturated rate is at most the burst rate it settles from.
        const double burst = burst_matmul_flops(g);
        if (g.sustained_matmul_flops > burst)
            r.error("sustained_matmul_tflops", "sustained_matmul_tflops = " + detail::fixed(g.sustained_matmul_flops / units::TFLOPS, 1) +
                                                   " must not exceed the burst GEMM rate, bf16 peak x matmul_efficiency = " +
                                                   detail::fixed(burst / units::TFLOPS, 1) + " TFLOP/s");
    }
    if (errs.empty() && cuda_total && g.capacity_bytes > g.smi_total_bytes)
        r.error("cuda_memory_mib", "cuda_memory_mib = " + detail::fixed(*cuda_total, 0) +
                                       " must not exceed the card's total, memory_gib x 1024 = " + detail::fixed(g.smi_total_bytes / units::MiB, 0) + " MiB");
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
    auto kind = r.choice<LinkKind>("kind", parse_enum<LinkKind>, enum_table<LinkKind>().allowed().c_str(), true);
    if (kind) l.kind = *kind;
    if (auto v = r.number("bandwidth_gb_s", 0.001, 1e6, true)) l.bandwidth_Bps = *v * units::GBps;
    if (auto v = r.number("efficiency", 0.01, 1.5)) l.efficiency = *v;
    if (auto v = r.number("latency_us", 0, 1e6)) l.latency_s = *v * units::us;
    if (auto v = r.boolean("p2p")) l.p2p = *v;
    if (auto v = r.boolean("nvls")) l.nvls = *v;
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
    if (auto v = r.number("host_ram_gib", 1, 1 << 24)) n.host_ram_bytes = *v * units::GiB;
    r.finish();
    if (!errs.empty()) return Error(errs);
    return n;
}

// ---------------------------------------------------------------- scenarios

void ScenarioInput::merge(const ScenarioInput& o) {
    // Every schema field set in `o` wins; its file origin goes, so messages name
    // where the winning value came from (o.origin, or the flag).
    for (const Field& f : scenario_fields()) {
        if (auto v = f.get(o)) {
            f.set(*this, *v);
            origin.erase(f.key);
        }
    }
    if (o.model || o.model_inline) {
        model = o.model;
        model_inline = o.model_inline;
        origin.erase("model");
    }
    for (const auto& [k, v] : o.origin) origin[k] = v;
}

namespace {

// One schema field from a TOML table: the type by the reader, the rule by the schema.
std::optional<FieldValue> read_field(TomlReader& r, const Field& f) {
    const std::string key = f.key;
    const FieldRule& rule = f.rule;
    std::optional<FieldValue> v;
    switch (rule.type) {
        case FieldType::Int:
            if (auto i = r.integer(key, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max())) v = *i;
            break;
        case FieldType::Number:
            if (auto d = r.number(key, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max())) v = *d;
            break;
        case FieldType::Bool:
            if (auto b = r.boolean(key)) v = *b;
            break;
        case FieldType::Text:
            if (auto s = r.string(key)) v = *s;
            break;
        case FieldType::Enum:
        case FieldType::LoraTargets:
            if (auto s = r.string(key)) {
                auto parsed = value_from_text(rule, *s, key);
                if (!parsed) r.error(key, parsed.error().diagnostics.front().message);
                else v = *parsed;
                return v;
            }
            break;
    }
    if (v) {
        if (auto msg = check_value(rule, *v, key)) {
            r.error(key, *msg);
            return std::nullopt;
        }
    }
    return v;
}

void read_model_section(TomlReader& r, const std::string& filename, ScenarioInput& in, std::vector<Diagnostic>& errs) {
    auto preset = r.string("preset");
    auto file = r.string("file");
    const bool inline_keys = r.has("num_layers") || r.has("hidden_size");
    if ((preset ? 1 : 0) + (file ? 1 : 0) + (inline_keys ? 1 : 0) > 1)
        r.error(preset ? "preset" : "file", "[model] takes one of: preset, file, or inline architecture keys");
    if (preset) { in.model = *preset; in.origin["model"] = r.origin("preset"); }
    if (file) {
        // A relative path is relative to the scenario file, not the current directory.
        const size_t slash = filename.find_last_of('/');
        in.model = file->empty() || (*file)[0] == '/' || slash == std::string::npos ? *file : filename.substr(0, slash + 1) + *file;
        in.origin["model"] = r.origin("file");
    }
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

}  // namespace

Result<ScenarioInput> parse_scenario_toml(std::string_view text, const std::string& filename, const std::vector<std::string>& extra_sections) {
    toml::table doc;
    if (auto err = detail::parse_document(text, filename, doc)) return *err;
    std::vector<Diagnostic> errs;
    ScenarioInput in;
    TomlReader top(doc, filename, "scenario", errs);

    if (const toml::table* t = top.subtable("model")) {
        TomlReader r(*t, filename, "[model]", errs);
        read_model_section(r, filename, in, errs);
    }
    for (const std::string& section : scenario_sections()) {
        const toml::table* t = top.subtable(section);
        if (!t) continue;
        TomlReader r(*t, filename, "[" + section + "]", errs);
        for (const Field& f : scenario_fields()) {
            if (section != f.section) continue;
            if (!r.has(f.key)) { r.ignore(f.key); continue; }
            in.origin[f.key] = r.origin(f.key);
            if (auto v = read_field(r, f)) f.set(in, *v);
        }
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
    // A [goal] number by the same rule as its flag (schema.cpp option_fields).
    auto option = [&](TomlReader& r, const char* key, bool required = false) -> std::optional<double> {
        const FieldRule& rule = option_field(key).rule;
        std::optional<double> v;
        if (rule.type == FieldType::Int) {
            if (auto i = r.integer(key, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(), required)) {
                if (auto msg = check_value(rule, *i, key)) r.error(key, *msg);
                else v = static_cast<double>(*i);
            }
        } else if (auto d = r.number(key, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max(), required)) {
            if (auto msg = check_value(rule, *d, key)) r.error(key, *msg);
            else v = *d;
        }
        return v;
    };
    if (const toml::table* t = top.subtable("goal")) {
        TomlReader r(*t, filename, "[goal]", errs);
        if (auto v = option(r, "tokens", true)) g.tokens = *v;
        if (auto v = option(r, "deadline_days")) g.deadline_days = *v;
        if (auto v = option(r, "budget_usd")) g.budget_usd = *v;
        if (auto v = option(r, "max_gpus")) g.max_gpus = static_cast<int>(*v);
        g.electricity = option(r, "electricity_usd_per_kwh");
        g.pue = option(r, "pue");
        g.amortization_years = option(r, "amortization_years");
        g.confidence = option(r, "confidence");
        if (auto b = r.string("cost_basis")) {
            if (*b != "outlay" && *b != "amortized") r.error("cost_basis", "cost_basis = \"" + *b + "\" is not one of: outlay, amortized");
            else g.cost_basis = *b;
        }
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
            TomlReader r(*t, filename, std::string("[") + section + "]", errs);
            for (const auto& [k, node] : *t) {
                const std::string key(k.str());
                if (auto v = r.number(key, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max())) {
                    if (auto msg = check_value(option_field(section).rule, *v, key)) r.error(key, *msg);
                    else (std::string(section) == "rent" ? g.rent : g.price)[key] = *v;
                }
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

namespace {

// Diagnostics about a key point at where the key was set (file:line) or at its flag.
struct Resolver {
    const ScenarioInput& in;
    PresetLookup& lookup;
    std::vector<Diagnostic> errs;
    Scenario s;
    std::optional<NodeSpec> node;

    Diagnostic locate(Diagnostic d) const {
        auto it = in.origin.find(d.key);
        if (d.file.empty() && it != in.origin.end()) {
            d.file = it->second.file;
            d.line = it->second.line;
            d.column = it->second.column;
        } else if (d.file.empty() && !d.key.empty() && d.key.rfind("--", 0) != 0) {
            if (const Field* f = field_by_key(d.key)) d.key = f->flag;
            else if (d.key != "model") {
                std::string flag = d.key;
                std::replace(flag.begin(), flag.end(), '_', '-');
                d.key = "--" + flag;
            }
        }
        return d;
    }
    void fail(const std::string& key, const std::string& msg) { errs.push_back(locate({"", 0, 0, key, msg})); }
    template <class R>
    R take(R&& result) {
        if (!result) for (const auto& d : result.error().diagnostics) errs.push_back(locate(d));
        return std::forward<R>(result);
    }

    void model() {
        if (in.model_inline) {
            s.model = *in.model_inline;
        } else if (in.model) {
            auto m = take(load_model(lookup, *in.model, "model"));
            if (m) s.model = *m;
        } else {
            errs.push_back({"", 0, 0, "model", "no model given (a preset name, size shorthand like 7b, TOML file or config.json)"});
        }
    }

    // A name read from a preset (the node's GPU and links, the GPU's NVLink) that
    // does not resolve is an error in that preset's file.
    template <class R>
    R named_in(R result, bool from_preset, PresetKind kind, const std::string& preset) {
        if (result || !from_preset) return result;
        Error e = result.error();
        if (auto src = lookup.find(kind, preset))
            for (Diagnostic& d : e.diagnostics)
                if (d.file.empty()) d.file = src->filename;
        return R(e);
    }

    // A node preset supplies defaults for GPU, links and NICs.
    void hardware() {
        if (in.node) {
            auto n = take(load_node(lookup, *in.node, "node"));
            if (n) node = *n;
        }
        const std::string gpu_name = in.gpu ? *in.gpu : node ? node->gpu : "";
        if (gpu_name.empty()) {
            errs.push_back({"", 0, 0, "gpu", "no GPU given (e.g. --gpu rtx-4090; 'trainplan gpus' lists presets)"});
        } else {
            auto g = take(named_in(load_gpu(lookup, gpu_name, "gpu"), !in.gpu && node, PresetKind::Node, in.node.value_or("")));
            if (g) s.cluster.gpu = *g;
        }
        s.cluster.num_gpus = static_cast<int>(in.gpus.value_or(1));
        const int default_per_node = node ? node->gpus_per_node : std::min(s.cluster.num_gpus, 8);
        s.cluster.gpus_per_node = in.gpus_per_node.value_or(default_per_node);
        s.cluster.nics_per_node = node ? node->nics_per_node : 0;
        s.cluster.host_ram_bytes = node ? node->host_ram_bytes : 0;
        links();
    }

    void links() {
        std::string intra = in.intra_node ? *in.intra_node : node ? node->intra_node : "";
        const bool intra_from_node = !in.intra_node && !intra.empty(), intra_from_gpu = !in.intra_node && intra.empty();
        if (intra.empty() && !s.cluster.gpu.id.empty()) intra = default_intra_node_link_id(s.cluster.gpu, s.cluster.gpus_per_node);
        if (!intra.empty()) {
            auto l = take(named_in(named_in(load_link(lookup, intra, "intra_node"), intra_from_node, PresetKind::Node, in.node.value_or("")),
                                   intra_from_gpu, PresetKind::Gpu, s.cluster.gpu.id));
            if (l) s.cluster.intra_node = *l;
        }
        // Default fabric between nodes: policy data (data/defaults.toml [inter_node]).
        const std::string default_inter = default_inter_node_link_id(s.cluster.gpu);
        const std::string inter = in.inter_node ? *in.inter_node : node && !node->inter_node.empty() ? node->inter_node : default_inter;
        if (s.cluster.num_gpus > s.cluster.gpus_per_node || in.inter_node) {
            auto l = take(named_in(load_link(lookup, inter, "inter_node"), !in.inter_node && node && !node->inter_node.empty(),
                                   PresetKind::Node, in.node.value_or("")));
            if (l) s.cluster.inter_node = *l;
        }
    }

    // Every schema field with a plain home in the scenario, after the method's
    // recipe defaults (so explicit values win over them).
    void setup() {
        TrainingSetup& t = s.setup;
        // The method's one recipe (moves.hpp) as defaults; explicit keys override it.
        if (in.method) apply_method_recipe(t, *in.method);
        // A card whose tensor cores take fp16 but not bf16 (Volta, Turing) trains in
        // fp16-mixed unless the scenario says otherwise (rule bf16-needs-hardware).
        if (!in.precision && !s.cluster.gpu.has_bf16_tensor_cores())
            t.precision = Precision::FP16Mixed;
        for (const Field& f : scenario_fields())
            if (f.apply)
                if (auto v = f.get(in)) f.apply(s, *v);
        if (in.fsdp) {
            t.fsdp = *in.fsdp;
            const int implied = fsdp_zero_stage(t.fsdp, t.zero_stage);
            if (in.zero && *in.zero != implied)
                fail("zero", "zero = " + std::to_string(*in.zero) + " contradicts fsdp = \"" + to_string(t.fsdp) +
                                 "\" (which shards like ZeRO-" + std::to_string(implied) + ")");
            t.zero_stage = implied;
        }
        if (!in.schedule && t.layout.vp > 1) t.layout.schedule = Schedule::Interleaved;
        // Files written before `stack` existed keyed Megatron's fused kernels on
        // framework = megatron: that framework still implies its stack.
        if (!in.stack && t.framework == Framework::Megatron) t.stack = Stack::MegatronCore;
        // A stack named without a framework runs its own engine's bookkeeping
        // (data/defaults.toml [stack.*] framework, zero_framework).
        if (in.stack && !in.framework) {
            const StackConventions& sc = policy().stack(*in.stack);
            const bool ds_zero = t.zero_stage >= 1 && t.fsdp == FsdpStrategy::None;
            t.framework = ds_zero ? sc.zero_framework : sc.framework;
        }
    }

    // dp from the GPU count, or the GPU count from dp.
    void layout() {
        ParallelLayout& p = s.setup.layout;
        if (in.dp) {
            p.dp = *in.dp;
            if (!in.gpus) s.cluster.num_gpus = p.world();
        } else {
            const int mp = p.model_parallel();
            if (mp > 0 && s.cluster.num_gpus % mp == 0) p.dp = s.cluster.num_gpus / mp;
            else fail("gpus", "gpus = " + std::to_string(s.cluster.num_gpus) + " must be a multiple of tp x pp x cp = " + std::to_string(mp));
        }
        if (!in.gpus_per_node && !node) s.cluster.gpus_per_node = std::min(s.cluster.num_gpus, 8);
    }

    // Global batch = micro_batch x grad_accum x dp.
    void batch() {
        TrainingSetup& t = s.setup;
        if (!in.global_batch) return;
        const std::int64_t per_step = t.micro_batch * t.layout.dp;
        const std::string gb = "global_batch = " + std::to_string(*in.global_batch);
        if (in.grad_accum && *in.global_batch != per_step * t.grad_accum)
            fail("global_batch", gb + " must equal micro_batch x grad_accum x dp = " + std::to_string(t.micro_batch) + " x " +
                                     std::to_string(t.grad_accum) + " x " + std::to_string(t.layout.dp));
        else if (per_step > 0 && *in.global_batch % per_step != 0)
            fail("global_batch", gb + " must be a multiple of micro_batch x dp = " + std::to_string(t.micro_batch) + " x " +
                                     std::to_string(t.layout.dp) + " = " + std::to_string(per_step));
        else if (per_step > 0)
            t.grad_accum = *in.global_batch / per_step;
    }
};

}  // namespace

Result<Scenario> resolve_scenario(const ScenarioInput& in, PresetLookup& lookup) {
    Resolver r{in, lookup, {}, {}, {}};
    r.model();
    r.hardware();
    r.setup();
    r.layout();
    const size_t before_batch = r.errs.size();
    r.batch();
    // Layout and model constraints are reported together with batch errors (all
    // a user has to fix at once), but only once model and hardware loaded.
    if (before_batch > 0) return Error(r.errs);
    for (const Diagnostic& d : check_model(r.s.model)) r.errs.push_back(r.locate(d));
    for (const Diagnostic& d : validate(r.s)) r.errs.push_back(r.locate(d));
    if (!r.errs.empty()) return Error(r.errs);
    return r.s;
}

}  // namespace trainplan
