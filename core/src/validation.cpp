#include "trainplan/validation.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>

#include "trainplan/fit.hpp"
#include "trainplan/input_limits.hpp"
#include "trainplan/time.hpp"
#include "trainplan/units.hpp"

namespace trainplan {

bool ValidationReport::within_bounds() const {
    const bool mem = memory.count == 0 || (memory.median <= 0.05 && memory.worst <= 0.15);
    const bool thr = throughput.count == 0 || (throughput.median <= 0.10 && throughput.p90 <= 0.20);
    return mem && thr && verdicts_failed == 0;
}

namespace {

std::string str(const toml::table& c, const char* k) { return c[k].value_or(std::string()); }
bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

std::string gpu_preset(const std::string& t) {
    if (contains(t, "A100-SXM4-40GB")) return "a100-sxm-40gb";
    if (contains(t, "A100-SXM4-80GB") || contains(t, "A100-80GB")) return "a100-sxm-80gb";
    if (contains(t, "H100")) return "h100-sxm";
    if (contains(t, "24GB")) return "rtx-4090";
    if (contains(t, "48GB")) return "rtx-a6000";
    if (t == "V100") return "v100-sxm2-32gb";
    return "";
}

// The model a case describes: a named preset when the case maps to one,
// otherwise the architecture fields the case carries.
std::optional<ModelSpec> case_model(const toml::table& c, PresetLookup& lookup, std::string& why) {
    if (auto preset = c["preset"].value<std::string>()) {
        auto m = load_model(lookup, *preset, "preset");
        if (m) return *m;
        why = m.error().message();
        return std::nullopt;
    }
    if (!c["n_layers"] || !c["hidden_size"] || !c["n_heads"]) {
        why = "architecture not given";
        return std::nullopt;
    }
    ModelSpec m;
    m.id = str(c, "id");
    m.name = str(c, "model_name");
    m.num_layers = c["n_layers"].value_or(0);
    m.hidden = c["hidden_size"].value_or(0);
    m.num_heads = c["n_heads"].value_or(0);
    m.num_kv_heads = c["n_kv_heads"].value_or(m.num_heads);
    m.head_dim = m.hidden / std::max<std::int64_t>(1, m.num_heads);
    m.ffn = c["ffn_hidden_size"].value_or(4 * m.hidden);
    m.vocab = c["vocab_size"].value_or(std::int64_t{51200});
    m.max_seq_len = c["seq_len"].value_or(std::int64_t{2048});
    const std::string fam = str(c, "arch_family");
    if (contains(fam, "llama")) {
        m.activation = Activation::SwiGLU;
        m.norm = NormKind::RMSNorm;
        m.position = PositionKind::RoPE;
    } else {
        // GPT-style (Megatron GPT, MPT, BLOOM): LayerNorm with bias, GELU, biases.
        m.activation = Activation::GELU;
        m.norm = NormKind::LayerNorm;
        m.norm_bias = true;
        m.qkv_bias = m.out_bias = m.mlp_bias = true;
        m.position = contains(fam, "bloom") ? PositionKind::ALiBi : PositionKind::Learned;
        m.embedding_norm = contains(fam, "bloom");
        m.tied_embeddings = true;  // Megatron shares input and output embeddings; MPT and BLOOM tie them
        // Megatron GPT and BLOOM trained with dropout 0.1; MPT with 0.
        m.dropout = contains(fam, "mpt") ? 0.0 : 0.1;
    }
    if (c["tied_embeddings"]) m.tied_embeddings = c["tied_embeddings"].value_or(true);
    return m;
}

struct Built {
    Scenario s;
    std::string assumptions;
};

std::optional<Built> case_scenario(const toml::table& c, PresetLookup& lookup, std::string& why) {
    const std::string id = str(c, "id");
    const std::string gpu = gpu_preset(str(c, "gpu_type"));
    if (gpu.empty()) { why = "no preset for GPU \"" + str(c, "gpu_type") + "\""; return std::nullopt; }
    if (c["cp"].value_or(1) > 1) { why = "context parallelism (cp > 1) is not modeled yet"; return std::nullopt; }
    auto m = case_model(c, lookup, why);
    if (!m) return std::nullopt;
    if (!c["num_gpus"]) { why = "GPU count not given"; return std::nullopt; }
    Built b;
    Scenario& s = b.s;
    s.model = *m;
    auto g = load_gpu(lookup, gpu, "gpu");
    if (!g) { why = g.error().message(); return std::nullopt; }
    s.cluster.gpu = *g;
    const int gpus = c["num_gpus"].value_or(1);
    s.cluster.num_gpus = gpus;
    s.cluster.gpus_per_node = std::min(gpus, static_cast<int>(c["gpus_per_node"].value_or(8)));
    // Interconnects: DGX A100 (Selene) = NVSwitch + 8 x HDR; MPT A100 = 8 x 200G
    // RoCE (1600 Gbps); H100 = DGX H100 (NVSwitch + 8 x NDR) where unstated;
    // BLOOM (Jean Zay) = 4 x 100 Gb/s Omni-Path per node.
    const std::string inter_text = str(c, "inter_node_interconnect");
    std::string intra = contains(gpu, "h100") ? "nvswitch-h100" : "nvswitch-a100";
    std::string inter = contains(gpu, "h100") ? "ib-ndr" : "ib-hdr";
    int nics = 8;
    if (contains(inter_text, "RoCE")) inter = "roce-200g";
    if (contains(inter_text, "Omni-Path")) { inter = "ib-edr"; nics = 4; }
    if (contains(gpu, "h100") && !c["inter_node_interconnect"]) b.assumptions += "DGX H100 interconnect assumed; ";
    auto li = load_link(lookup, intra, "intra_node");
    auto le = load_link(lookup, inter, "inter_node");
    if (!li || !le) { why = "link presets missing"; return std::nullopt; }
    s.cluster.intra_node = *li;
    s.cluster.inter_node = *le;
    s.cluster.nics_per_node = nics;

    TrainingSetup& t = s.setup;
    t.seq_len = c["seq_len"].value_or(std::int64_t{2048});
    const std::string prec = str(c, "precision");
    t.precision = contains(prec, "fp8") ? Precision::FP8Mixed
                  : contains(prec, "bf16-true") || contains(prec, "PURE") || contains(prec, "NF4") ? Precision::BF16
                  : contains(prec, "bf16") || contains(prec, "BF16") ? Precision::BF16Mixed
                  : Precision::FP16Mixed;
    t.framework = contains(id, "megatron") || contains(id, "korthikanti") || contains(id, "bloom") || contains(id, "palm")
                      ? Framework::Megatron : Framework::DeepSpeed;
    if (contains(prec, "amp_")) t.framework = Framework::PyTorchAMP;
    const std::string rec = str(c, "recompute");
    t.recompute = rec.rfind("full", 0) == 0 ? Recompute::Full : rec.rfind("selective", 0) == 0 ? Recompute::Selective : Recompute::None;
    if (!c["recompute"]) {
        // A source whose FLOP count includes recompute (Megatron Eq. 3) ran it.
        if (contains(str(c, "notes"), "incl. recompute")) t.recompute = Recompute::Full;
        else b.assumptions += "recompute not stated: none assumed; ";
    }
    // FlashAttention arrived in 2022: the Megatron 2021, Korthikanti and BLOOM runs
    // used fused eager softmax attention; MPT and the H100 runs use flash kernels.
    t.flash_attention = !(contains(id, "megatron2021") || contains(id, "korthikanti") || contains(id, "bloom") || contains(id, "palm"));
    // llm-foundry's benchmarks at the cited commit ran mosaicml/pytorch:1.13.1 with
    // attn_impl = 'flash', i.e. FlashAttention v1 (submit_benchmarks.py).
    if (contains(id, "mpt_")) t.attention_kernel = AttentionKernel::Flash1;
    // Megatron-Core on H100 uses Transformer Engine's cuDNN fused attention.
    if (contains(id, "megatron_readme_h100") || contains(id, "megatron_examples")) t.attention_kernel = AttentionKernel::Flash3;
    // Korthikanti Table 4 rows name their recompute and SP setting in the id.
    if (contains(id, "_layer_")) {
        t.recompute = contains(id, "full_recompute") ? Recompute::Full : contains(id, "selective") ? Recompute::Selective : Recompute::None;
        b.assumptions.clear();
    }
    t.zero_stage = c["zero_stage"].value_or(0);
    if (c["fsdp"].value_or(false)) t.zero_stage = 3;
    if (contains(str(c, "optimizer"), "distributed optimizer")) t.zero_stage = std::max(t.zero_stage, 1);
    ParallelLayout& p = t.layout;
    p.tp = c["tp"].value_or(1);
    p.pp = c["pp"].value_or(1);
    p.vp = c["vp"].value_or(1);
    if (p.vp > 1) p.schedule = Schedule::Interleaved;
    p.sequence_parallel = c["sp"].value_or(false);
    if (contains(id, "korthikanti") && (contains(id, "sp_selective") || contains(id, "sequence"))) p.sequence_parallel = true;
    p.dp = c["dp"].value_or(std::max(1, gpus / std::max(1, p.tp * p.pp)));
    if (!c["tp"] && !c["pp"] && !c["dp"]) { why = "parallel layout not given"; return std::nullopt; }
    if (!c["tp"] && !c["pp"] && c["dp"]) { why = "tensor / pipeline sizes not given"; return std::nullopt; }
    if (contains(str(c, "notes"), "tp-comm-overlap")) t.tp_comm_overlap = true;
    // Megatron-Core runs TP with sequence parallelism (its recommended setting;
    // the README rows do not list it).
    if ((contains(id, "megatron_readme") || contains(id, "megatron_examples")) && p.tp > 1 && !c["sp"]) {
        p.sequence_parallel = true;
        b.assumptions += "sequence parallel assumed with TP; ";
    }
    if (p.world() != gpus) { why = "tp x pp x dp does not match the GPU count"; return std::nullopt; }
    t.micro_batch = c["micro_batch_size"].value_or(std::int64_t{1});
    if (!c["micro_batch_size"]) b.assumptions += "micro-batch 1 assumed; ";
    const std::int64_t gb = c["global_batch_size"].value_or(t.micro_batch * p.dp);
    if (gb % (t.micro_batch * p.dp) != 0) { why = "global batch not divisible by micro-batch x dp"; return std::nullopt; }
    t.grad_accum = std::max<std::int64_t>(1, gb / (t.micro_batch * p.dp));
    auto v = validate(s);
    if (!v.empty()) { why = "not a valid scenario: " + v.front().message; return std::nullopt; }
    // Unstated recompute: the run fit in memory, so take the cheapest policy
    // that fits (none, then selective, then full).
    if (!c["recompute"] && !contains(str(c, "notes"), "incl. recompute") && !contains(id, "_layer_")) {
        for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
            t.recompute = r;
            if (estimate_memory(s).peak().fits()) break;
        }
        const std::string note = "recompute not stated: none assumed; ";
        if (auto pos = b.assumptions.find(note); pos != std::string::npos)
            b.assumptions.replace(pos, note.size(), std::string("recompute not stated: ") + to_string(t.recompute) + " (least that fits); ");
    }
    return b;
}

// Megatron-LM's FLOP count (Narayanan et al. 2021, Eq. 3), recompute included:
// 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per iteration.
double megatron_eq3_flops(const Scenario& s) {
    const double B = static_cast<double>(s.setup.global_batch()), sq = static_cast<double>(s.setup.seq_len);
    const double l = static_cast<double>(s.model.num_layers), h = static_cast<double>(s.model.hidden);
    const double V = static_cast<double>(s.model.vocab);
    return 96.0 * B * sq * l * h * h * (1.0 + sq / (6.0 * h) + V / (16.0 * l * h));
}

void throughput_row(const toml::table& c, PresetLookup& lookup, ValidationRow& row) {
    const std::string id = row.id;
    std::string why;
    auto b = case_scenario(c, lookup, why);
    if (!b) { row.note = why; return; }
    const Scenario& s = b->s;
    const TimeEstimate te = estimate_time(s);
    row.note = b->assumptions;
    const double gpus = s.cluster.num_gpus;
    if (c["per_layer_fwd_bwd_ms"]) {
        // One layer's forward + backward (+ recompute) with its TP collectives.
        const double per_layer = (te.time.compute_s + te.time.tp_comm_s) / s.setup.grad_accum / s.model.num_layers;
        row.metric = "layer fwd+bwd";
        row.unit = "ms";
        row.published = c["per_layer_fwd_bwd_ms"].value_or(0.0);
        row.predicted = per_layer * 1e3;
    } else if (c["iteration_time_s"]) {
        row.metric = "iteration time";
        row.unit = "s";
        row.published = c["iteration_time_s"].value_or(0.0);
        row.predicted = te.time.step_s;
    } else if (contains(id, "megatron2021") && c["tflops_per_gpu"]) {
        row.metric = "TFLOP/s per GPU (Megatron Eq. 3, recompute counted)";
        row.unit = "TFLOP/s";
        row.published = c["tflops_per_gpu"].value_or(0.0);
        row.predicted = megatron_eq3_flops(s) / te.time.step_s / gpus / units::TFLOPS;
    } else if (c["mfu_pct"]) {
        row.metric = "MFU (6N + 12 L h s)";
        row.unit = "%";
        row.published = c["mfu_pct"].value_or(0.0);
        row.predicted = 100.0 * te.throughput.mfu;
        if (contains(id, "mpt")) {
            // MPT counts 6 x all parameters (embeddings and learned positions included).
            const double n = c["n_params"].value_or(0.0);
            const double flops = 6.0 * n + 12.0 * s.model.num_layers * s.model.hidden * s.setup.seq_len;
            row.predicted = 100.0 * flops * te.throughput.tokens_per_s / gpus / c["peak_tflops_assumed"].value_or(s.cluster.gpu.bf16_flops / 1e12) / 1e12;
        }
    } else if (c["tokens_per_s_per_gpu"]) {
        row.metric = "tokens/s per GPU";
        row.unit = "tok/s";
        row.published = c["tokens_per_s_per_gpu"].value_or(0.0);
        row.predicted = te.throughput.tokens_per_s / gpus;
    } else {
        row.note = "no comparable figure (relative or aggregate claim only)";
        return;
    }
    if (row.published <= 0) { row.note = "no published figure"; return; }
    row.error = (row.predicted - row.published) / row.published;
    row.counted = true;
}

void memory_row(const toml::table& c, PresetLookup& lookup, ValidationRow& row) {
    const std::string id = row.id;
    if (str(c, "value_type") != "measured") { row.note = "exact analytic value (checked by the unit tests)"; return; }
    std::string why;
    if (!c["preset"]) { row.note = "model not among the presets (encoder-decoder or unstated architecture)"; return; }
    if (!c["seq_len"]) { row.note = "sequence length not given"; return; }
    // LitGPT 8641822 finetune/lora.py loads a full state dict into the FSDP model
    // (fabric.load_raw), materializing the unsharded weights on every rank; its
    // max_memory_allocated() spans that (13.48 + 6.74 GB for 7B on 2 GPUs; 26 + 13
    // GB, beyond 40 GB, for 13B on 2: the reported OOM).
    if (contains(id, "litgpt_a100_40g_lora_fsdp_")) {
        row.note = "peak set by loading a full (unsharded) state dict on every rank, not by training";
    } else if (contains(id, "litgpt") && contains(id, "_bnb_nf4")) {
        row.note = "LitGPT bitsandbytes rows carry ~30 % more activation memory than the same runs in bf16; mechanism not identified";
    }
    auto m = case_model(c, lookup, why);
    const std::string gpu = gpu_preset(str(c, "gpu_type"));
    if (!m || gpu.empty()) { row.note = why.empty() ? "GPU not identified" : why; return; }
    Scenario s;
    s.model = *m;
    auto g = load_gpu(lookup, gpu, "gpu");
    if (!g) { row.note = g.error().message(); return; }
    s.cluster.gpu = *g;
    const int gpus = c["num_gpus"].value_or(1);
    s.cluster.num_gpus = gpus;
    s.cluster.gpus_per_node = gpus;
    TrainingSetup& t = s.setup;
    t.seq_len = c["seq_len"].value_or(std::int64_t{2048});
    t.micro_batch = c["micro_batch_size"].value_or(std::int64_t{1});
    t.grad_accum = c["grad_accum_steps"].value_or(std::int64_t{1});
    t.layout.dp = gpus;
    t.zero_stage = c["zero_stage"].value_or(0);
    const std::string quant = str(c, "quantization");
    const std::string prec = str(c, "precision");
    t.precision = contains(prec, "bf16-true") || contains(prec, "NF4") ? Precision::BF16 : Precision::BF16Mixed;
    if (c["lora_rank"]) {
        t.method = contains(quant, "nf4") || contains(prec, "NF4") ? Method::QLoRA : Method::LoRA;
        t.lora.rank = c["lora_rank"].value_or(8);
        t.lora.alpha = c["lora_alpha"].value_or(16.0);
        t.lora.targets = contains(str(c, "lora_targets"), "all") ? kLoraAll : (kLoraQ | kLoraV);
        t.qlora.double_quant = contains(quant, "dq") || contains(quant, "double");
    }
    const std::string rec = str(c, "recompute");
    t.recompute = rec.rfind("full", 0) == 0 ? Recompute::Full : Recompute::None;
    t.flash_attention = true;  // PyTorch >= 2.0 scaled_dot_product_attention
    const bool allocated_only = contains(str(c, "memory_unit"), "max_memory_allocated") || contains(str(c, "source"), "litgpt");
    if (!validate(s).empty()) { row.note = "not a valid scenario: " + validate(s).front().message; return; }
    if (auto gb = c["memory_per_gpu_gb"].value<double>()) {
        if (allocated_only) {
            t.framework_overhead_bytes = 0;
            t.fragmentation_fraction = 0;
        }
        const MemoryBreakdown mb = estimate_memory(s).peak();
        row.metric = allocated_only ? "peak allocated memory" : "device memory";
        row.unit = "GB";
        row.published = *gb;
        row.predicted = (allocated_only ? mb.allocated : mb.total) / units::GB;
        row.error = (row.predicted - row.published) / row.published;
        row.counted = row.note.empty();
    } else if (c["oom"].value_or(false)) {
        const MemoryBreakdown mb = estimate_memory(s).peak();
        row.metric = "out of memory";
        row.unit = "GB";
        row.predicted = mb.total / units::GB;
        row.published = mb.capacity / units::GB;
        row.verdict = row.note.empty();
        row.verdict_ok = !mb.fits();
    } else if (auto bound = c["memory_upper_bound_gb"].value<double>()) {
        const FitReport fr = check_fit(s);
        row.metric = "fits";
        row.unit = "GB";
        row.published = *bound;
        row.predicted = fr.estimate.peak().total / units::GB;
        row.verdict = true;
        row.verdict_ok = fr.fits;
    } else {
        row.note = "no per-GPU figure";
    }
}

ValidationStats stats(std::vector<double> e) {
    ValidationStats s;
    s.count = static_cast<int>(e.size());
    if (e.empty()) return s;
    std::sort(e.begin(), e.end());
    const size_t n = e.size();
    s.median = n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
    // Nearest-rank 90th percentile.
    s.p90 = e[static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n))) - 1];
    s.worst = e.back();
    return s;
}

// Calls `fn` on every [[case]] table of every file; the first file that is not
// valid TOML or has no cases stops it with a diagnostic naming the file.
template <class Fn>
std::optional<Diagnostic> for_each_case(const std::vector<TextSource>& files, Fn fn) {
    for (const TextSource& f : files) {
        toml::table doc;
        if (auto too_big = check_input_limits(f.text, f.filename, InputFormat::Toml)) return too_big;
        try {
            doc = toml::parse(f.text, f.filename);
        } catch (const toml::parse_error& e) {
            return Diagnostic{f.filename, static_cast<int>(e.source().begin.line), static_cast<int>(e.source().begin.column), "",
                              "invalid TOML: " + std::string(e.description())};
        }
        const toml::array* cases = doc["case"].as_array();
        if (!cases) return Diagnostic{f.filename, 1, 1, "case", "no [[case]] entries"};
        for (const toml::node& n : *cases)
            if (const toml::table* c = n.as_table()) fn(*c);
    }
    return std::nullopt;
}

}  // namespace

Result<std::vector<PublishedRun>> published_runs(const std::vector<TextSource>& files, PresetLookup& lookup) {
    std::vector<PublishedRun> out;
    auto err = for_each_case(files, [&](const toml::table& c) {
        if (str(c, "kind") == "memory") return;
        std::string why;
        if (auto b = case_scenario(c, lookup, why)) out.push_back({str(c, "id"), b->s});
    });
    if (err) return *err;
    return out;
}

Result<ValidationReport> run_validation(const std::vector<TextSource>& files, PresetLookup& lookup) {
    ValidationReport rep;
    std::vector<double> mem, thr;
    auto err = for_each_case(files, [&](const toml::table& c) {
        ValidationRow row;
        row.id = str(c, "id");
        row.source = str(c, "source");
        const std::string kind = str(c, "kind");
        row.kind = kind == "memory" ? "memory" : "throughput";
        if (kind == "memory") memory_row(c, lookup, row);
        else throughput_row(c, lookup, row);
        if (row.counted) (row.kind == "memory" ? mem : thr).push_back(std::fabs(row.error));
        if (row.verdict) {
            ++rep.verdicts;
            if (!row.verdict_ok) ++rep.verdicts_failed;
        }
        rep.rows.push_back(std::move(row));
    });
    if (err) return *err;
    rep.memory = stats(mem);
    rep.throughput = stats(thr);
    return rep;
}

}  // namespace trainplan
