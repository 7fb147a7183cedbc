#include "trainplan/app/format.hpp"

#include <fmt/format.h>

#include "trainplan/memory.hpp"
#include "trainplan/opgraph.hpp"
#include "trainplan/policy.hpp"
#include "trainplan/schema.hpp"
#include "trainplan/sharding.hpp"
#include "trainplan/time.hpp"
#include "trainplan/units.hpp"

namespace trainplan::app {

std::string printable(std::string_view text, bool keep_lines) {
    std::string o;
    o.reserve(text.size());
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    for (size_t i = 0; i < n;) {
        const unsigned char c = p[i];
        if (c < 0x80) {
            if (c >= 0x20 && c != 0x7f) o += static_cast<char>(c);
            else if ((c == '\n' || c == '\t') && keep_lines) o += static_cast<char>(c);
            else if (c == '\n') o += "\\n";
            else if (c == '\t') o += "\\t";
            else if (c == '\r') o += "\\r";
            else o += fmt::format("\\x{:02x}", c);
            ++i;
            continue;
        }
        // A well-formed UTF-8 sequence (no overlongs, surrogates or > U+10FFFF).
        const int len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
        bool ok = len > 0 && i + static_cast<size_t>(len) <= n;
        for (int k = 1; ok && k < len; ++k) ok = (p[i + static_cast<size_t>(k)] & 0xC0) == 0x80;
        if (ok && len == 3) ok = !(c == 0xE0 && p[i + 1] < 0xA0) && !(c == 0xED && p[i + 1] >= 0xA0);
        if (ok && len == 4) ok = !(c == 0xF0 && p[i + 1] < 0x90) && !(c == 0xF4 && p[i + 1] >= 0x90);
        if (!ok) {
            o += fmt::format("\\x{:02x}", c);
            ++i;
            continue;
        }
        if (len == 2 && c == 0xC2 && p[i + 1] < 0xA0) o += fmt::format("\\u{:04x}", p[i + 1]);  // C1 controls (CSI is U+009B)
        else o.append(text.substr(i, static_cast<size_t>(len)));
        i += static_cast<size_t>(len);
    }
    return o;
}

std::string gb(double bytes) {
    const double v = bytes / units::GB;
    if (std::abs(v) >= 1000) return fmt::format("{:.0f} GB", v);
    if (std::abs(v) >= 100) return fmt::format("{:.1f} GB", v);
    return fmt::format("{:.2f} GB", v);
}

std::string given_back_text(const MemoryBreakdown& m) {
    std::string parts;
    if (m.gathered_ahead > 0) parts = gb(m.gathered_ahead) + " of layers gathered ahead";
    if (m.step_segments > 0) parts += (parts.empty() ? "" : " and ") + gb(m.step_segments) + " of the optimizer step's own segments";
    if (m.managed > 0) parts += (parts.empty() ? "" : " and ") + gb(m.managed) + " of paged optimizer states";
    if (m.transient_reserve + m.stream_pool > 0)
        parts += (parts.empty() ? "" : " and ") + gb(m.transient_reserve + m.stream_pool) + " of the allocator's cached blocks";
    return parts;
}

std::string allocator_segments(const TrainingSetup& t) { return expandable_segments_on(t) ? "expandable segments" : "default segments"; }

std::string count(std::int64_t n) {
    const double v = static_cast<double>(n);
    if (v >= 1e12) return fmt::format("{:.2f} T", v / 1e12);
    if (v >= 1e9) return fmt::format("{:.2f} B", v / 1e9);
    if (v >= 1e6) return fmt::format("{:.1f} M", v / 1e6);
    if (v >= 1e3) return fmt::format("{:.1f} K", v / 1e3);
    return fmt::format("{}", n);
}

namespace {
// The attention kernel the run executes, and why where it is not the one asked for.
std::string attention_run(const TrainingSetup& t) {
    if (!t.flash_attention) return "eager";
    if (!fused_attention_runs(t)) return "eager (no fused kernel takes fp32: the stack falls back to unfused attention)";
    if (t.precision == Precision::FP32) return "SDPA memory-efficient (FlashAttention takes fp16 / bf16 only)";
    return to_string(t.attention_kernel);
}
}  // namespace

std::string describe_setup(const Scenario& s) {
    const TrainingSetup& t = s.setup;
    std::string method = t.method == Method::Full ? "full fine-tune"
                         : t.method == Method::LoRA ? fmt::format("LoRA r={}", t.lora.rank)
                                                    : fmt::format("QLoRA {} r={}", to_string(t.qlora.quant), t.lora.rank);
    std::string line = fmt::format("{}, {}, {}", method, to_string(t.precision), to_string(t.optimizer));
    if (t.precision != Precision::FP32 && t.precision != Precision::BF16) line += fmt::format(" ({} convention)", to_string(t.framework));
    line += fmt::format(", ZeRO-{}", t.zero_stage);
    if (t.fsdp != FsdpStrategy::None) line += fmt::format(" (FSDP {})", to_string(t.fsdp));
    if (t.optimizer_offload != Offload::None) line += fmt::format(", optimizer offload {}", to_string(t.optimizer_offload));
    if (t.param_offload != Offload::None) line += fmt::format(", param offload {}", to_string(t.param_offload));
    line += fmt::format(", recompute {}, FlashAttention {}", to_string(t.recompute), t.flash_attention ? "on" : "off");
    const ParallelLayout& p = t.layout;
    line += fmt::format("\n  seq {}, micro-batch {}, grad accum {}, global batch {}; tp {} pp {} dp {}", t.seq_len,
                        t.micro_batch, t.grad_accum, t.global_batch(), p.tp, p.pp, p.dp);
    if (p.ep > 1) line += fmt::format(" ep {}", p.ep);
    if (p.cp > 1) line += fmt::format(" cp {}", p.cp);
    if (p.pp > 1) line += fmt::format(" ({}{})", to_string(p.schedule), p.vp > 1 ? fmt::format(", v={}", p.vp) : "");
    if (p.sequence_parallel) line += " +SP";
    // The stack's kernel and memory conventions (data/defaults.toml [stack.*]).
    const StackConventions& sc = policy().stack(t.stack);
    std::string loss(loss_copies(s.model, t).description);
    if (s.model.final_logit_softcap > 0)
        loss += sc.loss_fuses_softcap ? ", logit soft-cap inside the loss kernel"
                                      : ", soft-capped logits in model code (tanh output kept: 16-bit)";
    std::string attention = attention_run(t);
    if (s.model.attn_logit_softcap > 0 && !fused_attention_runs(t)) attention += ", soft-capped scores (tanh output kept)";
    line += fmt::format("\n  assumes: stack {}: loss {}; norms {}; {}; attention {}; allocator {}", to_string(t.stack),
                        loss,
                        sc.norms,
                        swiglu_kernel(t) == SwigluKernel::PackedFused && !sc.fused_swiglu
                            ? "eager element-wise kernels; packed fused SwiGLU (DeepSpeed's flat buffer makes gate / up one storage)"
                            : sc.elementwise,
                        attention, "caching allocator, " + allocator_segments(t));
    if (adamw_runs_foreach(t)) line += "; AdamW foreach (one memory pass per op)";
    if (const double copies = tp_shard_dim_copies_per_pair(t); copies > 0)
        line += copies > 2 ? "; DTensor sequence parallelism: each TP all-gather and reduce-scatter copies its tensor through dimension 0"
                           : "; DTensor sequence parallelism: each TP reduce-scatter copies its input through dimension 0";
    if (fsdp2_layer_overlap(t) && p.dp * p.cp > 1) {
        line += "; FSDP2: each layer's all-gather prefetched behind the layer before, its reduce-scatter behind the next one's backward, "
                "the copies out of and into their buffers on the compute stream";
        if (shard_plan(s).hybrid) line += "; HSDP: sharded inside the node, each layer's shard all-reduced across nodes on its own stream";
    }
    // The stack's eager model code around attention and the norms (opgraph.cpp).
    if (kv_repeated(s.model, t))
        line += fmt::format("; K and V repeated to all {} query heads before attention (kept at the query width, a copy each way)",
                            s.model.num_heads);
    if (attn_output_copied(t)) line += "; attention output transposed back through a copy the output projection keeps";
    if (const double nb = norm_weight_saved(s.model, t); nb > 0)
        line += fmt::format("; each RMSNorm keeps its {}-byte normalized input for its weight's gradient", nb);
    if (p.tp > 1 && tp_gathers_qk(s.model, t))
        line += "; q_norm / k_norm unsharded under TP (NoParallel): q and k gathered to every rank each forward, RoPE on all heads";
    if (fsdp_holds_input_grads(t))
        line += "; reentrant checkpointing under FSDP: each frozen block's input gradient held until backward ends";
    // fp32 adapters under autocast (opgraph.cpp lora_adapter): cast per use.
    if (fp32_stream(t))
        line += "; PEFT's prepare_model_for_kbit_training: embeddings, norms and LM head fp32, so the residual stream, checkpoints and "
                "norm outputs are fp32 (the 4-bit matmuls cast their input to 16 bits)";
    else if (t.qlora.kbit_upcast && t.method == Method::QLoRA)
        line += "; PEFT's fp32 upcast undone: the engine casts the whole model back to 16 bits (DeepSpeed module.half() / .bfloat16())";
    if (autocast_fp32_adapters(t) && fp32_stream(t))
        line += "; fp32 LoRA adapters under autocast (weights cast per step, their fp32 input cast to 16 bits per adapter)";
    else if (autocast_fp32_adapters(t))
        line += sc.lora_input_cast ? "; fp32 LoRA adapters under autocast (weights cast per step, PEFT's input cast to fp32 and back)"
                                   : "; fp32 LoRA adapters under autocast (weights cast per step)";
    // DeepSpeed ZeRO-1/2 reduce their gradient buckets with all-reduces, overlapped
    // with backward only under overlap_comm (time.cpp data_parallel_terms).
    // Before v0.12.4 (ds_reduce_per_rank) a rank's slice at a time, each after a
    // device synchronize under overlap_comm.
    if (runs_deepspeed_zero12(t) && p.dp * p.cp > 1) {
        if (t.ds_reduce_per_rank)
            line += ds_overlap_comm_on(t) ? "; DeepSpeed before v0.12.4 all-reduces each bucket a rank's slice at a time, a device synchronize before each: overlap_comm hides none of it"
                                          : "; DeepSpeed before v0.12.4 all-reduces each bucket a rank's slice at a time, on the compute stream (overlap_comm off)";
        else
            line += ds_overlap_comm_on(t) ? "; DeepSpeed all-reduces gradient buckets on its own stream under backward (overlap_comm)"
                                          : "; DeepSpeed all-reduces gradient buckets on the compute stream (overlap_comm off)";
    }
    // Where the host gathers layers ahead of the compute (memory.cpp).
    if (shard_plan(s).gathers_weights && gathers_ahead_of_compute(t))
        line += runs_deepspeed_zero3(t) ? "; DeepSpeed ZeRO-3 gathers on its own stream (overlap_comm), the host a launch queue ahead of the GPU"
                                        : "; FSDP without its all-gather limiter, the host a launch queue ahead of the GPU";
    return line;
}

std::string describe_params(const Scenario& s, std::int64_t trainable) {
    const ParamCounts pc = count_params(s.model);
    std::string line = fmt::format("params: {} total", count(pc.total));
    if (s.model.is_moe()) line += fmt::format(" ({} active per token)", count(pc.active));
    // The image encoder's weights are held but idle on text batches (opgraph.cpp).
    if (s.model.has_vision()) line += fmt::format(" ({} in the vision encoder and projector: weights only, text batches)", count(pc.vision));
    return line + fmt::format(", {} trainable", count(trainable));
}

std::string describe_hardware(const Scenario& s) {
    const ClusterSpec& c = s.cluster;
    std::string line = fmt::format("{} x {} ({:.1f} GiB)", c.num_gpus, c.gpu.name, c.gpu.smi_total_bytes / units::GiB);
    if (c.num_gpus > 1) {
        line += fmt::format(", {} per node over {}", c.gpus_per_node, c.intra_node.name);
        if (c.num_nodes() > 1) line += fmt::format(", nodes over {}", c.inter_node.name);
    }
    return line;
}

nlohmann::json memory_json(const MemoryBreakdown& m) {
    return {
        {"weights_bytes", m.weights},       {"gradients_bytes", m.gradients}, {"ddp_bucket_bytes", m.ddp_buckets},
        {"gradients_after_peak_bytes", m.grads_at_step}, {"peak_at_backward_end", m.peak_at_backward_end},
        {"optimizer_bytes", m.optimizer},   {"master_weights_bytes", m.master_weights},
        {"activations_bytes", m.activations}, {"logits_bytes", m.logits},
        {"temporary_bytes", m.temporary},   {"step_copies_bytes", m.step_copies}, {"peak_at_optimizer_step", m.peak_at_step},
        {"step_segments_bytes", m.step_segments}, {"gathered_ahead_bytes", m.gathered_ahead}, {"transient_reserve_bytes", m.transient_reserve}, {"stream_pool_bytes", m.stream_pool}, {"reserve_cut_bytes", m.reserve_cut},
        {"framework_bytes", m.framework},   {"nccl_buffer_bytes", m.nccl_buffers}, {"nccl_communicators", m.nccl_communicators},
        {"nccl_nvls_bytes", m.nccl_nvls},
        {"fragmentation_bytes", m.fragmentation}, {"allocated_bytes", m.allocated}, {"reserved_bytes", m.reserved()}, {"total_bytes", m.total},
        {"capacity_bytes", m.capacity},
        {"headroom_bytes", m.headroom()},   {"cpu_bytes", m.cpu},
        {"nvme_bytes", m.nvme},             {"paged_out_bytes", m.paged_out}, {"managed_bytes", m.managed},
        {"host_capacity_bytes", m.host_capacity > 0 ? nlohmann::json(m.host_capacity) : nlohmann::json(nullptr)},
        {"host_fits", m.host_fits()},
        {"fits", m.fits()},
    };
}

namespace {

nlohmann::json json_value(const Field& f, const FieldValue& v) {
    switch (f.rule.type) {
        case FieldType::Int: return std::get<std::int64_t>(v);
        case FieldType::Number: return std::get<double>(v);
        case FieldType::Bool: return std::get<bool>(v);
        default: return value_to_text(f.rule, v);
    }
}

// POSIX shell word: left bare when safe, else single-quoted.
std::string shell_word(const std::string& v) {
    if (!v.empty() && v.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,/+=:@%") == std::string::npos)
        return v;
    std::string q = "'";
    for (char c : v) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

}  // namespace

// The schema's sections, every field with a value (the JSON names are the keys).
nlohmann::json scenario_json(const Scenario& s) {
    const ParamCounts pc = count_params(s.model);
    nlohmann::json j = {
        {"model", {{"id", s.model.id}, {"name", s.model.name}, {"approximate", s.model.approximate},
                   {"params", pc.total}, {"active_params", pc.active}, {"vision_params", pc.vision}}},
        {"run", {{"loader_workers", s.run.loader_workers}, {"worker_samples_per_s", s.run.worker_samples_per_s},
                 {"storage_bytes_per_s", s.run.storage_bytes_per_s}, {"sustained_clock", s.run.sustained_clock}}},
    };
    for (const Field& f : scenario_fields()) {
        if (!f.read) continue;
        auto& slot = j[f.section][f.key];
        if (auto v = f.read(s)) slot = json_value(f, *v);
        else if (f.rule.type == FieldType::Text) slot = "";  // not applicable (one node: no inter-node link)
        else if (f.rule.type == FieldType::Int) slot = 0;    // 0 = the documented default
        else slot = "default";  // a number left to its documented default (never null: null is how NaN prints)
    }
    return j;
}

// Every saved field whose value differs from the default (and those whose
// default depends on other fields), so the line parses back to the same scenario.
std::string command_line(const Scenario& s, const std::string& model_ref, const std::string& command) {
    static const Scenario defaults{};
    std::string c = fmt::format("trainplan {} {}", command, shell_word(model_ref.empty() ? s.model.id : model_ref));
    for (const Field& f : scenario_fields()) {
        if (!f.saved || !f.read) continue;
        const auto v = f.read(s);
        if (!v || (!f.contextual_default && f.read(defaults) == v)) continue;
        c += fmt::format(" {} {}", f.flag, shell_word(value_to_text(f.rule, *v)));
    }
    // A calibrated scenario names its profile (the flag every scenario command reads).
    if (!s.calibration.source.empty()) c += " --calibration " + shell_word(s.calibration.source);
    return c;
}

namespace {
nlohmann::json band_json(const RatioBand& b) {
    return {{"regime", b.regime}, {"cases", b.n}, {"p10_ratio", b.p10}, {"p90_ratio", b.p90}};
}
}  // namespace

void add_time_band(nlohmann::json& j, const TimeEstimate& t, const RatioBand& band) {
    if (band.n <= 0) return;
    j["time"]["step_s_p10"] = t.time.step_s * band.p10;
    j["time"]["step_s_p90"] = t.time.step_s * band.p90;
    j["throughput"]["tokens_per_s_p10"] = t.throughput.tokens_per_s / band.p90;
    j["throughput"]["tokens_per_s_p90"] = t.throughput.tokens_per_s / band.p10;
    j["throughput"]["mfu_p10"] = t.throughput.mfu / band.p90;
    j["throughput"]["mfu_p90"] = t.throughput.mfu / band.p10;
    if (j.contains("cost")) {
        j["cost"]["train_time_s_p10"] = t.cost.train_time_s * band.p10;
        j["cost"]["train_time_s_p90"] = t.cost.train_time_s * band.p90;
        j["cost"]["rent_cost_usd_p10"] = t.cost.rent_cost_usd * band.p10;
        j["cost"]["rent_cost_usd_p90"] = t.cost.rent_cost_usd * band.p90;
    }
    j["intervals"]["time"] = band_json(band);
}

void add_memory_band(nlohmann::json& j, double total_bytes, const RatioBand& band) {
    if (band.n <= 0) return;
    j["memory"]["total_bytes_p10"] = total_bytes * band.p10;
    j["memory"]["total_bytes_p90"] = total_bytes * band.p90;
    j["intervals"]["memory"] = band_json(band);
}

std::string sharding_text(const TrainingSetup& t) {
    if (t.zero_stage == 0) return t.layout.dp * t.layout.cp > 1 ? "DDP" : "-";
    if (t.framework == Framework::Megatron && t.zero_stage == 1) return "dist-opt";
    if (t.framework == Framework::DeepSpeed || t.framework == Framework::Megatron || t.zero_stage == 1) return fmt::format("ZeRO-{}", t.zero_stage);
    return fmt::format("{} {}", fsdp2_layer_overlap(t) ? "FSDP2" : "FSDP", t.zero_stage == 3 ? "full" : "grad-op");
}

std::string layout_text(const Scenario& s) {
    const ParallelLayout& p = s.setup.layout;
    std::string l = fmt::format("tp{} pp{} dp{}", p.tp, p.pp, p.dp);
    if (p.vp > 1) l += fmt::format(" v{}", p.vp);
    if (p.schedule == Schedule::GPipe) l += " gpipe";
    if (p.sequence_parallel) l += " sp";
    if (p.ep > 1) l += fmt::format(" ep{}", p.ep);
    if (p.cp > 1) l += fmt::format(" cp{}", p.cp);
    if (s.setup.tp_comm_overlap) l += " ovl";
    if (s.setup.activation_offload) l += " act>host";
    if (s.setup.fsdp == FsdpStrategy::HybridShard) l += " hsdp";
    if (s.setup.param_offload != Offload::None) l += fmt::format(" params>{}", to_string(s.setup.param_offload));
    return l;
}

}  // namespace trainplan::app
