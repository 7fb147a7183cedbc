// The scenario schema table (see schema.hpp) and the one value rule.
#include "trainplan/schema.hpp"

#include <cassert>
#include <charconv>
#include <cstring>
#include <cmath>
#include <vector>

#include "trainplan/memory.hpp"
#include "trainplan/opgraph.hpp"
#include "trainplan/units.hpp"

namespace trainplan {

// ---------------------------------------------------------------- values

std::string shortest(double v) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

namespace {

std::string as_text(double v) { return shortest(v); }

}  // namespace

std::optional<std::string> check_value(const FieldRule& rule, const FieldValue& v, const std::string& name) {
    switch (rule.type) {
        case FieldType::Int: {
            const auto i = std::get<std::int64_t>(v);
            if (static_cast<double>(i) < rule.lo) return name + " = " + std::to_string(i) + " must be at least " + as_text(rule.lo);
            if (static_cast<double>(i) > rule.hi) return name + " = " + std::to_string(i) + " exceeds the maximum " + as_text(rule.hi);
            return std::nullopt;
        }
        case FieldType::Number: {
            const double d = std::get<double>(v);
            if (!std::isfinite(d)) return name + " = " + as_text(d) + " must be a finite number";
            if (d < rule.lo) return name + " = " + as_text(d) + " must be at least " + as_text(rule.lo);
            if (d > rule.hi) return name + " = " + as_text(d) + " exceeds the maximum " + as_text(rule.hi);
            return std::nullopt;
        }
        case FieldType::Enum:
            if (!std::strcmp(rule.choices->name(static_cast<int>(std::get<std::int64_t>(v))), "?"))
                return name + " is not one of: " + rule.choices->allowed();
            return std::nullopt;
        case FieldType::LoraTargets:
            if (std::get<std::int64_t>(v) <= 0 || std::get<std::int64_t>(v) > kLoraAll)
                return name + " must list modules from: " + lora_targets_allowed();
            return std::nullopt;
        case FieldType::Text:
            if (std::get<std::string>(v).empty()) return name + " must not be empty";
            return std::nullopt;
        case FieldType::Bool: return std::nullopt;
    }
    return std::nullopt;
}

Result<FieldValue> value_from_text(const FieldRule& rule, std::string_view text, const std::string& name) {
    const std::string quoted = "\"" + std::string(text) + "\"";
    auto fail = [&](const std::string& msg) { return Result<FieldValue>(Diagnostic{"", 0, 0, name, msg}); };
    FieldValue v;
    switch (rule.type) {
        case FieldType::Int: {
            std::int64_t i = 0;
            auto r = std::from_chars(text.data(), text.data() + text.size(), i);
            if (r.ec != std::errc() || r.ptr != text.data() + text.size()) {
                // 1e6 and 4096.0 are integers too.
                double d = 0;
                auto rd = std::from_chars(text.data(), text.data() + text.size(), d);
                if (rd.ec != std::errc() || rd.ptr != text.data() + text.size() || !std::isfinite(d) || std::floor(d) != d ||
                    std::fabs(d) > 9e15)
                    return fail(name + " = " + quoted + " must be an integer");
                i = static_cast<std::int64_t>(d);
            }
            v = i;
            break;
        }
        case FieldType::Number: {
            double d = 0;
            auto r = std::from_chars(text.data(), text.data() + text.size(), d);
            if (r.ec == std::errc::result_out_of_range) return fail(name + " = " + std::string(text) + " must be a finite number");
            if (r.ec != std::errc() || r.ptr != text.data() + text.size()) return fail(name + " = " + quoted + " must be a number");
            v = d;
            break;
        }
        case FieldType::Bool: {
            std::string s(text);
            for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            if (s == "on" || s == "true" || s == "yes" || s == "1") v = true;
            else if (s == "off" || s == "false" || s == "no" || s == "0") v = false;
            else return fail(name + " = " + quoted + " must be on or off");
            break;
        }
        case FieldType::Enum: {
            auto e = rule.choices->parse(text);
            if (!e) return fail(name + " = " + quoted + " is not one of: " + rule.choices->allowed());
            v = std::int64_t{*e};
            break;
        }
        case FieldType::LoraTargets: {
            auto m = parse_lora_targets(text);
            if (!m) return fail(name + " = " + quoted + " must list modules from: " + lora_targets_allowed());
            v = std::int64_t{*m};
            break;
        }
        case FieldType::Text: v = std::string(text); break;
    }
    if (auto msg = check_value(rule, v, name)) return fail(*msg);
    return v;
}

std::string value_to_text(const FieldRule& rule, const FieldValue& v) {
    switch (rule.type) {
        case FieldType::Int: return std::to_string(std::get<std::int64_t>(v));
        case FieldType::Number: return shortest(std::get<double>(v));
        case FieldType::Bool: return std::get<bool>(v) ? "on" : "off";
        case FieldType::Enum: return rule.choices->name(static_cast<int>(std::get<std::int64_t>(v)));
        case FieldType::LoraTargets: return lora_targets_to_string(static_cast<unsigned>(std::get<std::int64_t>(v)));
        case FieldType::Text: return std::get<std::string>(v);
    }
    return "";
}

// ---------------------------------------------------------------- the table

namespace {

// Conversions between a C++ field and a FieldValue.
template <class T>
FieldValue to_value(const T& x) {
    if constexpr (std::is_enum_v<T>) return std::int64_t{static_cast<int>(x)};
    else if constexpr (std::is_same_v<T, bool>) return x;
    else if constexpr (std::is_integral_v<T>) return static_cast<std::int64_t>(x);
    else if constexpr (std::is_floating_point_v<T>) return static_cast<double>(x);
    else return std::string(x);
}
template <class T>
void from_value(const FieldValue& v, T& out) {
    if constexpr (std::is_enum_v<T>) out = static_cast<T>(std::get<std::int64_t>(v));
    else if constexpr (std::is_same_v<T, bool>) out = std::get<bool>(v);
    else if constexpr (std::is_integral_v<T>) out = static_cast<T>(std::get<std::int64_t>(v));
    else if constexpr (std::is_floating_point_v<T>) out = std::get<double>(v);
    else out = std::get<std::string>(v);
}

template <auto M>
std::optional<FieldValue> get_input(const ScenarioInput& in) {
    const auto& o = in.*M;
    if (!o) return std::nullopt;
    return to_value(*o);
}
template <auto M>
void clear_input(ScenarioInput& in) {
    (in.*M).reset();
}
template <auto M>
void set_input(ScenarioInput& in, const FieldValue& v) {
    auto& o = in.*M;
    o.emplace();
    from_value(v, *o);
}

FieldRule integer(double lo, double hi) { return {FieldType::Int, lo, hi, nullptr, std::nullopt}; }
FieldRule number(double lo, double hi) { return {FieldType::Number, lo, hi, nullptr, std::nullopt}; }
FieldRule boolean() { return {FieldType::Bool, 0, 1, nullptr, std::nullopt}; }
template <class E>
FieldRule choice() { return {FieldType::Enum, 0, 0, &enum_table<E>(), std::nullopt}; }
FieldRule preset(PresetKind k) { return {FieldType::Text, 0, 0, nullptr, k}; }
FieldRule lora_targets() { return {FieldType::LoraTargets, 0, 0, nullptr, std::nullopt}; }

// One row: the ScenarioInput member, then where the value lives in a Scenario.
template <auto M>
Field row(const char* section, const char* key, const char* flag, const char* label, FieldRule rule, const char* help,
          std::optional<FieldValue> (*read)(const Scenario&), void (*apply)(Scenario&, const FieldValue&)) {
    Field f{section, key, flag, "", label, rule, help};
    f.get = &get_input<M>;
    f.set = &set_input<M>;
    f.clear = &clear_input<M>;
    f.read = read;
    f.apply = apply;
    return f;
}

// Read and apply lambdas for a plain Scenario member path.
#define TP_AT(path)                                                                              \
    [](const Scenario& s) -> std::optional<FieldValue> { return to_value(s.path); },           \
        [](Scenario& s, const FieldValue& v) { from_value(v, s.path); }

using In = ScenarioInput;
constexpr std::int64_t kMaxGpus = 1 << 20;

std::vector<Field> make_fields() {
    std::vector<Field> f;
    // ---- [hardware]
    f.push_back(row<&In::gpu>("hardware", "gpu", "--gpu", "GPU", preset(PresetKind::Gpu), "GPU preset (trainplan gpus)",
                              [](const Scenario& s) -> std::optional<FieldValue> {
                                  if (s.cluster.gpu.id.empty()) return std::nullopt;
                                  return s.cluster.gpu.id;
                              },
                              nullptr));
    f.push_back(row<&In::node>("hardware", "node", "--node", "Node", preset(PresetKind::Node),
                               "Node preset (trainplan nodes): GPU, links and NICs", nullptr, nullptr));
    f.back().saved = false;  // written as the gpu, links and NICs it expands into
    f.push_back(row<&In::gpus>("hardware", "gpus", "--gpus", "GPUs", integer(1, kMaxGpus), "Number of GPUs (default 1)",
                               [](const Scenario& s) -> std::optional<FieldValue> { return to_value(s.cluster.num_gpus); }, nullptr));
    f.push_back(row<&In::gpus_per_node>("hardware", "gpus_per_node", "--gpus-per-node", "GPUs per node", integer(1, 4096),
                                        "GPUs per node (default min(gpus, 8) or the node preset)",
                                        [](const Scenario& s) -> std::optional<FieldValue> { return to_value(s.cluster.gpus_per_node); },
                                        nullptr));
    f.back().contextual_default = true;
    f.push_back(row<&In::intra_node>("hardware", "intra_node", "--intra-node", "Intra-node link", preset(PresetKind::Link),
                                     "Link preset between GPUs of a node (default: the GPU's NVLink or PCIe)",
                                     [](const Scenario& s) -> std::optional<FieldValue> {
                                         if (s.cluster.intra_node.id.empty()) return std::nullopt;
                                         return s.cluster.intra_node.id;
                                     },
                                     nullptr));
    f.push_back(row<&In::inter_node>("hardware", "inter_node", "--inter-node", "Inter-node link", preset(PresetKind::Link),
                                     "Link preset between nodes (default: the fabric of the GPU generation's DGX)",
                                     [](const Scenario& s) -> std::optional<FieldValue> {
                                         if (s.cluster.inter_node.id.empty()) return std::nullopt;
                                         return s.cluster.inter_node.id;
                                     },
                                     nullptr));
    f.push_back(row<&In::nics_per_node>("hardware", "nics_per_node", "--nics-per-node", "NICs per node", integer(1, 4096),
                                        "Network adapters per node (default one per GPU)",
                                        [](const Scenario& s) -> std::optional<FieldValue> {
                                            if (s.cluster.nics_per_node <= 0) return std::nullopt;
                                            return to_value(s.cluster.nics_per_node);
                                        },
                                        [](Scenario& s, const FieldValue& v) { from_value(v, s.cluster.nics_per_node); }));

    f.push_back(row<&In::host_ram_gib>("hardware", "host_ram_gib", "--host-ram", "Host RAM per node (GiB)", number(1, 1 << 24),
                                       "CPU memory of one node in GiB, checked against offloaded states (default: the node preset's; else not checked)",
                                       [](const Scenario& s) -> std::optional<FieldValue> {
                                           if (s.cluster.host_ram_bytes <= 0) return std::nullopt;
                                           return to_value(s.cluster.host_ram_bytes / units::GiB);
                                       },
                                       [](Scenario& s, const FieldValue& v) {
                                           double g = 0;
                                           from_value(v, g);
                                           s.cluster.host_ram_bytes = g * units::GiB;
                                       }));

    // ---- [training]
    f.push_back(row<&In::method>("training", "method", "--method", "Method", choice<Method>(), "Training method (default full)",
                                 TP_AT(setup.method)));
    f.push_back(row<&In::precision>("training", "precision", "--precision", "Precision", choice<Precision>(),
                                    "Numeric precision (default bf16-mixed; bf16 for QLoRA)", TP_AT(setup.precision)));
    f.back().contextual_default = true;
    f.push_back(row<&In::tf32>("training", "tf32", "--tf32", "TF32 matmuls", boolean(),
                               "fp32 precision: matmuls in TF32 on tensor cores (allow_tf32): on | off (default off)",
                               TP_AT(setup.tf32)));
    f.push_back(row<&In::fp8_params>("training", "fp8_params", "--fp8-params", "FP8 parameters", boolean(),
                                     "fp8-mixed: weights kept in FP8 alone, gathered by data parallelism at 1 B (NeMo fp8_params, Megatron-Core --fp8-param-gather, torchao float8 all-gather): on | off (default off)",
                                     TP_AT(setup.fp8_params)));
    f.push_back(row<&In::optimizer>("training", "optimizer", "--optimizer", "Optimizer", choice<OptimizerKind>(),
                                    "Optimizer (default adamw)", TP_AT(setup.optimizer)));
    f.push_back(row<&In::framework>("training", "framework", "--framework", "Bookkeeping", choice<Framework>(),
                                    "Mixed-precision bookkeeping convention (default: the named stack's own engine, its "
                                    "[stack.*] framework / zero_framework in data/defaults.toml -- pytorch-amp for the "
                                    "transformers stacks, deepspeed for them under ZeRO, megatron for Megatron; deepspeed "
                                    "when no stack is named)",
                                    TP_AT(setup.framework)));
    f.back().contextual_default = true;
    f.push_back(row<&In::stack>("training", "stack", "--stack", "Training stack", choice<Stack>(),
                                "Training stack whose kernel and memory conventions apply (default generic-eager; "
                                "megatron-core when framework = megatron)",
                                TP_AT(setup.stack)));
    f.back().contextual_default = true;
    f.push_back(row<&In::grad_accum_fusion>("training", "grad_accum_fusion", "--grad-accum-fusion", "Grad accumulation fusion", boolean(),
                                            "Megatron: weight-gradient GEMMs accumulate into the fp32 main grads (default on); "
                                            "off = --no-gradient-accumulation-fusion, a separate add every micro-batch",
                                            TP_AT(setup.grad_accum_fusion)));
    f.push_back(row<&In::nccl>("training", "nccl", "--nccl", "NCCL release", choice<NcclRelease>(),
                               "NCCL release the run links, for the NVLink SHARP buffers of NVSwitch nodes (default current: "
                               "2.22 and later)",
                               TP_AT(setup.nccl)));
    f.push_back(row<&In::zero>("training", "zero", "--zero", "ZeRO stage", integer(0, 3), "ZeRO stage 0-3 (default 0)",
                               TP_AT(setup.zero_stage)));
    f.push_back(row<&In::fsdp>("training", "fsdp", "--fsdp", "FSDP", choice<FsdpStrategy>(),
                               "FSDP sharding strategy (sets the ZeRO stage it shards like)",
                               [](const Scenario& s) -> std::optional<FieldValue> { return to_value(s.setup.fsdp); }, nullptr));
    f.push_back(row<&In::optimizer_offload>("training", "optimizer_offload", "--offload-optimizer", "Optimizer offload",
                                            choice<Offload>(), "Optimizer states offload (needs zero >= 1)",
                                            TP_AT(setup.optimizer_offload)));
    f.push_back(row<&In::param_offload>("training", "param_offload", "--offload-params", "Parameter offload", choice<Offload>(),
                                        "Parameter offload (needs zero = 3)", TP_AT(setup.param_offload)));
    f.push_back(row<&In::recompute>("training", "recompute", "--recompute", "Recompute", choice<Recompute>(),
                                    "Activation recompute (default none; full for QLoRA)", TP_AT(setup.recompute)));
    f.back().contextual_default = true;
    f.push_back(row<&In::recompute_method>("training", "recompute_method", "--recompute-method", "Recompute method",
                                           choice<RecomputeMethod>(),
                                           "Which layers full recompute checkpoints: uniform | block | every (default uniform)",
                                           TP_AT(setup.recompute_method)));
    f.push_back(row<&In::recompute_layers>("training", "recompute_layers", "--recompute-layers", "Recompute layers", integer(0, 1 << 20),
                                           "uniform: layers per checkpoint; block: layers checkpointed per stage; every: k (0 = default; more than a stage holds = all of them, as Megatron-LM does)",
                                           TP_AT(setup.recompute_layers)));
    f.push_back(row<&In::activation_offload>("training", "activation_offload", "--activation-offload", "Activation offload", boolean(),
                                             "Saved activations to host memory and back: on | off (default off)",
                                             TP_AT(setup.activation_offload)));
    f.push_back(row<&In::optimizer_in_backward>("training", "optimizer_in_backward", "--optimizer-in-backward", "Optimizer in backward",
                                                boolean(),
                                                "Step and free each gradient during backward (torchtune optimizer_in_bwd): on | off (default off; needs grad_accum = 1)",
                                                TP_AT(setup.optimizer_in_backward)));
    f.push_back(row<&In::flash_attention>("training", "flash_attention", "--flash-attention", "FlashAttention", boolean(),
                                          "Fused attention kernel: on | off (default on)", TP_AT(setup.flash_attention)));
    f.push_back(row<&In::attention_kernel>("training", "attention_kernel", "--attention-kernel", "Attention kernel",
                                           choice<AttentionKernel>(), "Fused attention generation (default flash2)",
                                           TP_AT(setup.attention_kernel)));
    f.push_back(row<&In::held_outputs>("training", "held_outputs", "--held-outputs", "Held outputs", choice<HeldOutputs>(),
                                       "Model outputs the training loop keeps through backward: none | logits | logits-kv (past_key_values with use_cache) (default none)",
                                       TP_AT(setup.held_outputs)));
    f.push_back(row<&In::fsdp_limit_all_gathers>("training", "fsdp_limit_all_gathers", "--fsdp-limit-all-gathers",
                                                 "FSDP all-gather limiter", boolean(),
                                                 "FSDP limit_all_gathers: on keeps two layers gathered at once; off lets the host run ahead, each gathered layer held until the GPU reaches it (default on)",
                                                 TP_AT(setup.fsdp_limit_all_gathers)));
    f.push_back(row<&In::ds_gather_per_tensor>(
        "training", "ds_gather_per_tensor", "--ds-gather-per-tensor", "ZeRO-3 per-tensor gathers (DeepSpeed < 0.6)", boolean(),
        "DeepSpeed ZeRO-3 of v0.3.13-v0.5.x: each parameter tensor gathered alone after a device sync, into one output per rank copied out one by one: host time per rank, per tensor and pass, exposed (default off: v0.6 and later, FSDP)",
        TP_AT(setup.ds_gather_per_tensor)));
    f.push_back(row<&In::ds_reduce_per_rank>(
        "training", "ds_reduce_per_rank", "--ds-reduce-per-rank", "ZeRO-1/2 reduce per rank (DeepSpeed < 0.12.4)", boolean(),
        "DeepSpeed ZeRO-1/2 before v0.12.4: each gradient bucket reduced one destination rank at a time, after a device synchronize under overlap_comm: the whole reduction exposed, in dp collectives per bucket (default off: v0.12.4 and later)",
        TP_AT(setup.ds_reduce_per_rank)));
    f.push_back(row<&In::ds_reduce_bucket>("training", "ds_reduce_bucket", "--ds-reduce-bucket", "DeepSpeed reduce bucket",
                                           number(1, 1e12),
                                           "DeepSpeed zero_optimization.reduce_bucket_size in elements: ZeRO-1/2 copy gradients into a bucket this size, ZeRO-3 module by module before each reduce-scatter (default 5e8, DeepSpeed's)",
                                           TP_AT(setup.ds_reduce_bucket)));
    f.push_back(row<&In::ds_overlap_comm>(
        "training", "ds_overlap_comm", "--ds-overlap-comm", "DeepSpeed overlap_comm", boolean(),
        "DeepSpeed zero_optimization.overlap_comm: ZeRO-1/2 reduce the gradient buckets on their own stream under backward and double-buffer them; ZeRO-3 gathers weights on a stream of its own, ahead of the compute (default DeepSpeed's: off for stages 1-2, on for stage 3)",
        [](const Scenario& s) -> std::optional<FieldValue> { return to_value(ds_overlap_comm_on(s.setup)); },
        [](Scenario& s, const FieldValue& v) {
            bool on = false;
            from_value(v, on);
            s.setup.ds_overlap_comm = on;
        }));
    f.back().contextual_default = true;  // follows the ZeRO stage
    f.push_back(row<&In::fused_linear_ce>(
        "training", "fused_linear_ce", "--fused-linear-ce", "Fused linear cross-entropy", boolean(),
        "Liger's fused linear cross-entropy (transformers use_liger_kernel=True): the LM head and loss in token chunks, no whole logits "
        "(default: the stack's; on for hf-liger where tp = 1, off elsewhere: the stack's own loss)",
        [](const Scenario& s) -> std::optional<FieldValue> { return to_value(fused_linear_ce_on(s.setup)); },
        [](Scenario& s, const FieldValue& v) {
            bool on = false;
            from_value(v, on);
            s.setup.fused_linear_ce = on;
        }));
    f.back().contextual_default = true;  // follows the stack
    f.push_back(row<&In::ds_sub_group_size>("training", "ds_sub_group_size", "--ds-sub-group-size", "DeepSpeed sub_group_size",
                                            number(1, 1e15),
                                            "DeepSpeed zero_optimization.sub_group_size in elements: the ZeRO-3 step copies one sub-group's gradients at a time (default 1e9, DeepSpeed's)",
                                            TP_AT(setup.ds_sub_group_size)));
    f.push_back(row<&In::ds_prefetch_bucket>("training", "ds_prefetch_bucket", "--ds-prefetch-bucket", "DeepSpeed stage3_prefetch_bucket_size",
                                             number(0, 1e15),
                                             "DeepSpeed zero_optimization.stage3_prefetch_bucket_size in elements: ZeRO-3 gathers the modules after the current one up to this many (default 5e7, DeepSpeed's; the HF integration's \"auto\" is 0.9 h^2)",
                                             TP_AT(setup.ds_prefetch_bucket)));
    f.push_back(row<&In::ds_max_reuse_distance>("training", "ds_max_reuse_distance", "--ds-max-reuse-distance", "DeepSpeed stage3_max_reuse_distance",
                                                number(0, 1e15),
                                                "DeepSpeed zero_optimization.stage3_max_reuse_distance in elements: ZeRO-3 keeps a module's gathered parameters where the trace uses them again within this many fetched elements, as the head and last layers at the turn to backward (default 1e9, DeepSpeed's)",
                                                TP_AT(setup.ds_max_reuse_distance)));
    f.push_back(row<&In::ddp_bucket_view>("training", "ddp_bucket_view", "--ddp-bucket-view", "DDP gradient_as_bucket_view", boolean(),
                                          "torch DDP gradient_as_bucket_view: on makes the gradients views of the all-reduce buckets; off (PyTorch's default) keeps a second, gradient-sized copy in them",
                                          TP_AT(setup.ddp_bucket_view)));
    f.push_back(row<&In::seq_len>("training", "seq_len", "--seq-len", "Sequence length", integer(1, 16 * 1024 * 1024),
                                  "Sequence length in tokens (default 2048)", TP_AT(setup.seq_len)));
    f.push_back(row<&In::micro_batch>("training", "micro_batch", "--micro-batch", "Micro-batch", integer(1, 1 << 20),
                                      "Micro-batch size per GPU (default 1)", TP_AT(setup.micro_batch)));
    f.push_back(row<&In::grad_accum>("training", "grad_accum", "--grad-accum", "Gradient accumulation", integer(1, 1 << 24),
                                     "Gradient accumulation steps (default 1)", TP_AT(setup.grad_accum)));
    f.back().in_form = false;  // the GUI edits the global batch, which sets it
    f.push_back(row<&In::global_batch>("training", "global_batch", "--global-batch", "Global batch",
                                       integer(1, static_cast<double>(std::int64_t{1} << 40)),
                                       "Global batch in sequences (sets the accumulation)",
                                       [](const Scenario& s) -> std::optional<FieldValue> { return to_value(s.setup.global_batch()); },
                                       nullptr));
    f.back().saved = false;  // written as grad_accum
    f.push_back(row<&In::lora_rank>("training", "lora_rank", "--lora-rank", "LoRA rank", integer(1, 65536),
                                    "LoRA rank (default 16)", TP_AT(setup.lora.rank)));
    f.push_back(row<&In::lora_alpha>("training", "lora_alpha", "--lora-alpha", "LoRA alpha", number(0, 1e6),
                                     "LoRA alpha (default 32)", TP_AT(setup.lora.alpha)));
    f.push_back(row<&In::lora_dropout>("training", "lora_dropout", "--lora-dropout", "LoRA dropout", number(0, 0.99),
                                       "LoRA dropout (default 0.05)", TP_AT(setup.lora.dropout)));
    f.push_back(row<&In::lora_targets>("training", "lora_targets", "--lora-targets", "LoRA targets", lora_targets(),
                                       "Adapted modules: q,k,v,o,gate,up,down | attention | mlp | all (default all)",
                                       TP_AT(setup.lora.targets)));
    f.push_back(row<&In::quant>("training", "quant", "--quant", "QLoRA quantization", choice<QuantType>(),
                                "QLoRA base quantization (default nf4)", TP_AT(setup.qlora.quant)));
    f.push_back(row<&In::train_embeddings>("training", "train_embeddings", "--train-embeddings", "Train embeddings", boolean(),
                                           "LoRA: also train the embedding and LM head in full (PEFT modules_to_save): on | off (default off)",
                                           TP_AT(setup.lora.train_embeddings)));
    f.push_back(row<&In::double_quant>("training", "double_quant", "--double-quant", "Double quantization", boolean(),
                                       "QLoRA double quantization: on | off (default on)", TP_AT(setup.qlora.double_quant)));
    f.push_back(row<&In::kbit_upcast>(
        "training", "kbit_upcast", "--kbit-upcast", "fp32 non-quantized weights", boolean(),
        "QLoRA (bitsandbytes): PEFT's prepare_model_for_kbit_training casts embeddings, norms and LM head to fp32, so the residual stream and norm outputs are fp32 (trl SFTTrainer, the QLoRA notebooks): on | off (default off)",
        TP_AT(setup.qlora.kbit_upcast)));
    f.push_back(row<&In::paged_optimizer>(
        "training", "paged_optimizer", "--paged-optimizer", "Paged optimizer", boolean(),
        "bitsandbytes paged optimizer (PagedAdamW): its states in CUDA unified memory, outside torch's allocated / reserved counts, paged to the host when the GPU runs out: on | off (default on for QLoRA outside a DeepSpeed ZeRO engine, off otherwise)",
        [](const Scenario& s) -> std::optional<FieldValue> { return to_value(paged_optimizer_on(s.setup)); },
        [](Scenario& s, const FieldValue& v) {
            bool on = false;
            from_value(v, on);
            s.setup.paged_optimizer = on;
        }));
    f.back().contextual_default = true;  // follows the method
    f.push_back(row<&In::checkpoint_reentrant>(
        "training", "checkpoint_reentrant", "--checkpoint-reentrant", "Reentrant checkpointing", boolean(),
        "Full recompute as torch.utils.checkpoint's reentrant implementation (use_reentrant=True, transformers' gradient_checkpointing_enable default) or the non-reentrant one (FSDP's checkpoint_wrapper): on | off (default: the stack's)",
        [](const Scenario& s) -> std::optional<FieldValue> { return to_value(reentrant_checkpointing(s.setup)); },
        [](Scenario& s, const FieldValue& v) {
            bool on = false;
            from_value(v, on);
            s.setup.checkpoint_reentrant = on;
        }));
    f.back().contextual_default = true;  // follows the stack
    f.push_back(row<&In::expandable_segments>(
        "training", "expandable_segments", "--expandable-segments", "Expandable segments", boolean(),
        "The run sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the caching allocator grows segments in place and keeps "
        "less of what it frees unusable (a smaller reserve): on | off (default: the stack's; torchtitan's run_train.sh sets it)",
        [](const Scenario& s) -> std::optional<FieldValue> { return to_value(expandable_segments_on(s.setup)); },
        [](Scenario& s, const FieldValue& v) {
            bool on = false;
            from_value(v, on);
            s.setup.expandable_segments = on;
        }));
    f.back().contextual_default = true;  // follows the stack
    f.push_back(row<&In::framework_overhead_gib>(
        "training", "framework_overhead_gib", "--framework-overhead-gib", "Framework overhead (GiB)", number(0, 1024),
        "Override CUDA context + library + NCCL overhead (GiB)",
        [](const Scenario& s) -> std::optional<FieldValue> {
            if (s.setup.framework_overhead_bytes < 0) return std::nullopt;
            return s.setup.framework_overhead_bytes / units::GiB;
        },
        [](Scenario& s, const FieldValue& v) { s.setup.framework_overhead_bytes = std::get<double>(v) * units::GiB; }));
    f.push_back(row<&In::fragmentation>("training", "fragmentation", "--fragmentation", "Fragmentation", number(0, 1),
                                        "Override allocator reserve as a fraction of the allocated peak (default: the stack's share of transient bytes; layers gathered ahead of the compute count on top)",
                                        [](const Scenario& s) -> std::optional<FieldValue> {
                                            if (s.setup.fragmentation_fraction < 0) return std::nullopt;
                                            return s.setup.fragmentation_fraction;
                                        },
                                        [](Scenario& s, const FieldValue& v) { s.setup.fragmentation_fraction = std::get<double>(v); }));

    // ---- [parallel]
    f.push_back(row<&In::tp>("parallel", "tp", "--tp", "TP", integer(1, 1 << 16), "Tensor parallel size", TP_AT(setup.layout.tp)));
    f.push_back(row<&In::pp>("parallel", "pp", "--pp", "PP", integer(1, 1 << 16), "Pipeline parallel size", TP_AT(setup.layout.pp)));
    f.push_back(row<&In::dp>("parallel", "dp", "--dp", "DP", integer(1, kMaxGpus), "Data parallel size (default gpus / (tp x pp x cp))",
                             [](const Scenario& s) -> std::optional<FieldValue> { return to_value(s.setup.layout.dp); }, nullptr));
    f.back().in_form = false;  // the GUI shows dp = gpus / (tp x pp x cp)
    f.push_back(row<&In::ep>("parallel", "ep", "--ep", "EP", integer(1, 1 << 16), "Expert parallel size (MoE)", TP_AT(setup.layout.ep)));
    f.push_back(row<&In::vp>("parallel", "vp", "--vp", "VP", integer(1, 1024), "Interleaved pipeline chunks per stage",
                             TP_AT(setup.layout.vp)));
    f.push_back(row<&In::cp>("parallel", "cp", "--cp", "CP", integer(1, 1 << 16),
                             "Context parallel size: ranks one sequence is split over (ring attention)", TP_AT(setup.layout.cp)));
    f.push_back(row<&In::sequence_parallel>("parallel", "sequence_parallel", "--sequence-parallel", "Sequence parallel", boolean(),
                                            "Sequence parallelism (with tp > 1)", TP_AT(setup.layout.sequence_parallel)));
    f.back().alias = "--sp";
    f.push_back(row<&In::tp_comm_overlap>("parallel", "tp_comm_overlap", "--tp-comm-overlap", "TP comm overlap", boolean(),
                                          "Overlap TP collectives with GEMMs (Megatron-Core --tp-comm-overlap)",
                                          TP_AT(setup.tp_comm_overlap)));
    f.push_back(row<&In::grad_reduce_bf16>("parallel", "grad_reduce_bf16", "--grad-reduce-bf16", "Reduce grads in bf16", boolean(),
                                           "Reduce gradients in 16 bits where they are kept in fp32 (Megatron --grad-reduce-in-bf16)",
                                           TP_AT(setup.grad_reduce_bf16)));
    f.push_back(row<&In::overlap_grad_reduce>("parallel", "overlap_grad_reduce", "--overlap-grad-reduce", "Overlap grad reduce", boolean(),
                                              "Reduce gradients bucket by bucket during backward (default on: PyTorch DDP, Megatron "
                                              "--overlap-grad-reduce); off: after the last backward",
                                              TP_AT(setup.overlap_grad_reduce)));
    f.push_back(row<&In::split_counts_embedding>(
        "parallel", "account_for_embedding_in_pipeline_split", "--account-for-embedding-in-pipeline-split", "Embedding counts as a layer",
        boolean(), "Count the embedding as one layer when splitting layers over pipeline stages (Megatron-Core flag of the same name)",
        TP_AT(setup.layout.split_counts_embedding)));
    f.push_back(row<&In::split_counts_loss>(
        "parallel", "account_for_loss_in_pipeline_split", "--account-for-loss-in-pipeline-split", "Loss counts as a layer", boolean(),
        "Count the output layer and loss as one layer when splitting layers over pipeline stages (Megatron-Core flag of the same name)",
        TP_AT(setup.layout.split_counts_loss)));
    f.push_back(row<&In::schedule>("parallel", "schedule", "--schedule", "Schedule", choice<Schedule>(),
                                   "Pipeline schedule (default 1f1b; interleaved when vp > 1)", TP_AT(setup.layout.schedule)));
    f.back().contextual_default = true;
    return f;
}
#undef TP_AT

}  // namespace

std::span<const Field> scenario_fields() {
    static const std::vector<Field> fields = make_fields();
    return fields;
}

const Field* field_by_key(std::string_view key) {
    for (const Field& f : scenario_fields())
        if (key == f.key) return &f;
    return nullptr;
}

const Field* field_by_flag(std::string_view flag) {
    for (const Field& f : scenario_fields())
        if (flag == f.flag || (*f.alias && flag == f.alias)) return &f;
    return nullptr;
}

std::vector<std::string> scenario_sections() {
    std::vector<std::string> out;
    for (const Field& f : scenario_fields())
        if (out.empty() || out.back() != f.section) out.emplace_back(f.section);
    return out;
}

// ---------------------------------------------------------------- options around a scenario

namespace {

std::vector<OptionField> make_options() {
    return {
        {"tokens", "--tokens", number(1, 1e18), "Tokens to train (e.g. 1e12)"},
        {"deadline_days", "--deadline-days", number(0.001, 36500), "Deadline in days"},
        {"budget_usd", "--budget", number(0, 1e13), "Budget in USD for the job, on the cost basis (rent, or purchase + energy; amortized purchase + energy with --cost-basis amortized)"},
        {"max_gpus", "--max-gpus", integer(1, kMaxGpus), "Largest GPU count to consider"},
        {"electricity_usd_per_kwh", "--electricity", number(0, 100), "Electricity in $ per kWh (default 0.12)"},
        {"pue", "--pue", number(1, 5), "Facility power usage effectiveness (default 1.2)"},
        {"amortization_years", "--amortize-years", number(0.1, 50), "Amortization period for purchased GPUs (default 3)"},
        {"confidence", "--confidence", number(0.5, 0.99), "Probability the deadline is met and memory fits, from the accuracy band (default 0.9 = P90; 0.5 = point estimate)"},
        {"rent", "--rent", number(0, 1e4), "Rent per GPU-hour in USD, as GPU=USD (repeatable, e.g. h100-sxm=2.5)"},
        {"price", "--price", number(0, 1e8), "Purchase price per GPU in USD, as GPU=USD (repeatable; default the preset's)"},
        {"loader_workers", "--loader-workers", integer(0, 1024), "Data-loader workers per GPU (0: pre-tokenized data, no stall)"},
        {"worker_samples_per_s", "--worker-samples-per-s", number(0.001, 1e9), "Samples one loader worker prepares per second"},
        {"storage_gb_s", "--storage-gb-s", number(0.001, 1e6), "Storage read bandwidth per node (GB/s)"},
        {"sustained_clock", "--sustained-clock", number(0.05, 1), "Sustained clock as a fraction of boost, or of the power-saturated clock where the GPU preset gives one (thermal/power limits; default 1)"},
        {"target_tokens_per_s", "--target-tokens-per-s", number(0, 1e15), "Throughput the fewest-GPUs query must reach"},
        {"observed_step_s", "--observed-step-s", number(1e-6, 1e7), "Measured seconds per optimizer step"},
        {"observed_tokens_per_s", "--observed-tokens-per-s", number(1e-3, 1e12), "Measured tokens per second (whole job)"},
        {"gpu_util", "--gpu-util", number(0, 100), "Average GPU utilization in % (nvidia-smi)"},
        {"observed_peak_memory_gb", "--observed-peak-memory-gb", number(0, 1e5), "Peak memory per GPU seen (GB)"},
        {"gpu_temp", "--gpu-temp", number(0, 130), "GPU temperature under load (C)"},
        {"gpu_clock_mhz", "--gpu-clock-mhz", number(50, 10000), "Sustained SM clock under load (MHz)"},
        {"top", "--top", integer(1, 1000), "How many layouts to list (default 10)"},
        {"remedies", "--remedies", integer(1, 100), "How many remedies to list"},
    };
}

}  // namespace

std::span<const OptionField> option_fields() {
    static const std::vector<OptionField> options = make_options();
    return options;
}

const OptionField& option_field(std::string_view key) {
    for (const OptionField& o : option_fields())
        if (key == o.key) return o;
    assert(false && "unknown option field");
    return option_fields().front();
}

}  // namespace trainplan
