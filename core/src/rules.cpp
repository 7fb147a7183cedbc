#include "trainplan/rules.hpp"

#include <string>
#include <vector>

#include "trainplan/enums.hpp"
#include "trainplan/opgraph.hpp"
#include "trainplan/policy.hpp"

namespace trainplan {

namespace {

using S = RuleStage;

constexpr RuleInfo kInfo[] = {
    {"seq-len-range", "seq_len", S::Base, "seq_len outside 1 .. 16,777,216"},
    {"micro-batch-range", "micro_batch", S::Base, "micro_batch outside 1 .. 1,048,576"},
    {"grad-accum-range", "grad_accum", S::Base, "grad_accum outside 1 .. 16,777,216"},
    {"gpus-range", "gpus", S::Base, "gpus outside 1 .. 1,048,576"},
    {"gpus-per-node-range", "gpus_per_node", S::Base, "gpus_per_node below 1"},
    {"zero-range", "zero", S::Base, "zero not one of 0, 1, 2, 3"},
    {"layout-positive", "tp", S::Base, "tp, pp, dp, ep, vp and cp must be at least 1"},
    {"world-equals-layout", "gpus", S::Pipeline, "tp x pp x cp x dp differs from the GPU count"},
    {"tp-divides-heads", "tp", S::TensorParallel, "tp does not divide the attention heads"},
    {"tp-divides-kv-heads", "tp", S::TensorParallel, "tp does not divide the key/value heads"},
    {"tp-divides-ffn", "tp", S::TensorParallel, "tp does not divide the FFN width"},
    {"cp-divides-seq", "cp", S::TensorParallel, "seq_len not divisible by 2 x cp"},
    {"cp-needs-flash-attention", "cp", S::TensorParallel, "cp > 1 without flash attention"},
    {"tp-within-node", "tp", S::TensorParallel, "tp spans nodes"},
    {"pp-vp-within-layers", "pp", S::Schedule, "pp x vp exceeds the layers"},
    {"vp-needs-interleaved", "vp", S::Schedule, "vp > 1 without the interleaved schedule"},
    {"interleaved-needs-pp", "schedule", S::Schedule, "interleaved schedule with pp < 2"},
    {"interleaved-divides-layers", "vp", S::Schedule, "layers do not split into pp x vp chunks"},
    {"pipeline-split-divides", "pp", S::Schedule, "layers + counted embedding / loss do not split over pp"},
    {"ep-needs-moe", "ep", S::Experts, "ep > 1 on a dense model"},
    {"ep-divides-experts", "ep", S::Experts, "ep does not divide the experts"},
    {"ep-divides-dp", "ep", S::Experts, "ep does not divide dp"},
    {"global-batch-divides", "global_batch", S::Batch, "global batch not divisible by micro-batch x dp"},
    {"interleave-needs-microbatches", "grad_accum", S::Batch,
     "interleaved schedule with micro-batches not a multiple of pp"},
    {"zero-with-pipeline", "zero", S::Setup, "ZeRO-2/3 combined with pipeline parallelism"},
    {"param-offload-needs-zero3", "param_offload", S::Setup, "parameter offload without ZeRO-3"},
    {"optimizer-offload-needs-zero", "optimizer_offload", S::Setup, "optimizer offload without ZeRO"},
    {"optimizer-in-backward-no-accumulation", "optimizer_in_backward", S::Setup,
     "optimizer in backward with gradient accumulation or optimizer offload"},
    {"lora-rank-positive", "lora_rank", S::Base, "LoRA rank below 1"},
    {"lora-targets-non-empty", "lora_targets", S::Base, "LoRA without target modules"},
    {"fp8-needs-hardware", "precision", S::Base, "fp8-mixed on a GPU without FP8 tensor cores"},
    {"fp8-params-need-fp8", "fp8_params", S::Base, "FP8 parameters without fp8-mixed precision"},
    {"kbit-upcast-needs-bnb", "kbit_upcast", S::Base, "fp32 upcast of the non-quantized weights without a bitsandbytes QLoRA base"},
    {"bf16-needs-hardware", "precision", S::Base, "bf16 on a GPU whose tensor cores have no BF16 (Volta, Turing)"},
    {"seq-within-learned-positions", "seq_len", S::Base, "seq_len beyond learned position embeddings"},
    {"gpu-has-memory", "gpu", S::Base, "GPU without memory capacity"},
    {"stack-tensor-parallel", "tp", S::TensorParallel, "tensor / sequence parallelism on a stack that runs data parallelism only"},
    {"stack-context-parallel", "cp", S::TensorParallel, "context parallelism on a stack without it"},
    {"stack-pipeline-parallel", "pp", S::Pipeline, "pipeline parallelism on a stack without it"},
    {"stack-expert-parallel", "ep", S::Experts, "expert parallelism on a stack without it"},
    {"stack-tp-comm-overlap", "tp_comm_overlap", S::Setup, "TP communication overlap on a stack without it"},
    {"stack-activation-offload", "activation_offload", S::Setup, "activation offload on a stack without it"},
    {"stack-fused-linear-ce", "fused_linear_ce", S::Setup, "Liger's fused linear cross-entropy on a stack with its own loss, or under tensor parallelism"},
};

static_assert(sizeof(kInfo) / sizeof(kInfo[0]) == kRuleCount, "one RuleInfo per Rule");

std::string num(std::int64_t v) { return std::to_string(v); }
std::int64_t ffn_of(const ModelSpec& m) { return m.is_moe() ? m.moe.expert_ffn : m.ffn; }
std::int64_t chunks(const ParallelLayout& p) { return std::int64_t{p.pp} * p.vp; }

// One row of the rule table: `broken` decides, `message` explains (built only
// for validation, never in the search's inner loop).
struct Check {
    Rule rule;
    const char* key;  // key of this violation (range rules have one row per key)
    bool (*broken)(const Scenario&, const RuleOptions&);
    std::string (*message)(const Scenario&, const RuleOptions&);
};

// What the stack can run, and the stacks that can (for the messages).
const StackConventions& caps(const Scenario& s) { return policy().stack(s.setup.stack); }
std::string stacks_with(bool StackConventions::*has) {
    std::string out;
    for (const EnumEntry& e : enum_table<Stack>().entries)
        if (policy().stack(static_cast<Stack>(e.value)).*has) out += std::string(out.empty() ? "" : ", ") + e.name;
    return out;
}
// `layout`: the refusal is of a kind of parallelism (say what the stack runs).
std::string refused(const Scenario& s, const std::string& what, bool StackConventions::*has, bool layout = true) {
    const std::string head = what + " needs a stack that runs it (" + stacks_with(has) + "); stack = \"" + to_string(s.setup.stack) + "\"";
    if (!layout) return head + " has no such switch";
    // The kinds it does run: data parallelism always, then the model parallelism it has.
    std::vector<std::string> kinds{"data parallelism (DDP, ZeRO, FSDP)"};
    if (caps(s).tensor_parallel) kinds.emplace_back("tensor");
    if (caps(s).pipeline_parallel) kinds.emplace_back("pipeline");
    if (caps(s).context_parallel) kinds.emplace_back("context");
    if (caps(s).expert_parallel) kinds.emplace_back("expert");
    if (kinds.size() > 1) kinds.back() += " parallelism";  // "..., tensor and pipeline parallelism"
    std::string list;
    for (std::size_t i = 0; i < kinds.size(); ++i) list += (i == 0 ? "" : i + 1 == kinds.size() ? " and " : ", ") + kinds[i];
    return head + " runs " + list + " only";
}

#define T(s) const Scenario& s, const RuleOptions&
#define TO(s, o) const Scenario& s, const RuleOptions& o

std::string at_least(const char* key, std::int64_t v, std::int64_t lo) {
    return std::string(key) + " = " + num(v) + " must be at least " + num(lo);
}
std::string range(const char* key, std::int64_t v, std::int64_t lo, std::int64_t hi) {
    return v < lo ? at_least(key, v, lo) : std::string(key) + " = " + num(v) + " exceeds the supported maximum " + num(hi);
}

const Check kRanges[] = {
    {Rule::SeqLenRange, "seq_len", [](T(s)) { return s.setup.seq_len < 1 || s.setup.seq_len > 16 * 1024 * 1024; },
     [](T(s)) { return range("seq_len", s.setup.seq_len, 1, 16 * 1024 * 1024); }},
    {Rule::MicroBatchRange, "micro_batch", [](T(s)) { return s.setup.micro_batch < 1 || s.setup.micro_batch > (1 << 20); },
     [](T(s)) { return range("micro_batch", s.setup.micro_batch, 1, 1 << 20); }},
    {Rule::GradAccumRange, "grad_accum", [](T(s)) { return s.setup.grad_accum < 1 || s.setup.grad_accum > (1 << 24); },
     [](T(s)) { return range("grad_accum", s.setup.grad_accum, 1, 1 << 24); }},
    {Rule::GpusRange, "gpus", [](T(s)) { return s.cluster.num_gpus < 1 || s.cluster.num_gpus > (1 << 20); },
     [](T(s)) { return range("gpus", s.cluster.num_gpus, 1, 1 << 20); }},
    {Rule::GpusPerNodeRange, "gpus_per_node", [](T(s)) { return s.cluster.gpus_per_node < 1; },
     [](T(s)) { return at_least("gpus_per_node", s.cluster.gpus_per_node, 1); }},
    {Rule::ZeroRange, "zero", [](T(s)) { return s.setup.zero_stage < 0 || s.setup.zero_stage > 3; },
     [](T(s)) { return "zero = " + num(s.setup.zero_stage) + " must be one of 0, 1, 2, 3"; }},
    {Rule::LayoutPositive, "tp", [](T(s)) { return s.setup.layout.tp < 1; }, [](T(s)) { return at_least("tp", s.setup.layout.tp, 1); }},
    {Rule::LayoutPositive, "pp", [](T(s)) { return s.setup.layout.pp < 1; }, [](T(s)) { return at_least("pp", s.setup.layout.pp, 1); }},
    {Rule::LayoutPositive, "dp", [](T(s)) { return s.setup.layout.dp < 1; }, [](T(s)) { return at_least("dp", s.setup.layout.dp, 1); }},
    {Rule::LayoutPositive, "ep", [](T(s)) { return s.setup.layout.ep < 1; }, [](T(s)) { return at_least("ep", s.setup.layout.ep, 1); }},
    {Rule::LayoutPositive, "vp", [](T(s)) { return s.setup.layout.vp < 1; }, [](T(s)) { return at_least("vp", s.setup.layout.vp, 1); }},
    {Rule::LayoutPositive, "cp", [](T(s)) { return s.setup.layout.cp < 1; }, [](T(s)) { return at_least("cp", s.setup.layout.cp, 1); }},
};

const Check kStructural[] = {
    {Rule::WorldEqualsLayout, "gpus", [](T(s)) { return s.setup.layout.world() != s.cluster.num_gpus; },
     [](T(s)) {
         const ParallelLayout& p = s.setup.layout;
         return "tp x pp x cp x dp = " + num(p.tp) + " x " + num(p.pp) + " x " + num(p.cp) + " x " + num(p.dp) + " = " + num(p.world()) +
                " must equal gpus = " + num(s.cluster.num_gpus);
     }},
    {Rule::TpDividesHeads, "tp", [](T(s)) { return s.model.num_heads % s.setup.layout.tp != 0; },
     [](T(s)) { return "tp = " + num(s.setup.layout.tp) + " must divide num_heads = " + num(s.model.num_heads); }},
    // Megatron-LM splits attention into whole query groups per rank.
    {Rule::TpDividesKvHeads, "tp",
     [](T(s)) { return s.model.num_heads % s.setup.layout.tp == 0 && s.model.num_kv_heads % s.setup.layout.tp != 0; },
     [](T(s)) {
         return "tp = " + num(s.setup.layout.tp) + " must divide num_kv_heads = " + num(s.model.num_kv_heads) +
                " (Megatron requires whole query groups per rank)";
     }},
    {Rule::TpDividesFfn, "tp", [](T(s)) { return ffn_of(s.model) % s.setup.layout.tp != 0; },
     [](T(s)) { return "tp = " + num(s.setup.layout.tp) + " must divide ffn_hidden_size = " + num(ffn_of(s.model)); }},
    // Megatron-Core / Transformer Engine split each sequence into 2 x cp chunks
    // and give rank r chunks r and 2cp - 1 - r, so that every rank carries the
    // same share of the causal mask (Megatron-Core context_parallel docs).
    {Rule::CpDividesSeq, "cp", [](T(s)) { return s.setup.layout.cp > 1 && s.setup.seq_len % (2 * std::int64_t{s.setup.layout.cp}) != 0; },
     [](T(s)) {
         return "seq_len = " + num(s.setup.seq_len) + " must be divisible by 2 x cp = " + num(2 * std::int64_t{s.setup.layout.cp}) +
                " (context parallelism splits each sequence into 2 x cp load-balanced chunks)";
     }},
    // Ring attention runs a fused attention kernel on each K/V block; there is
    // no context-parallel path for eager (s x s materialized) attention.
    {Rule::CpNeedsFlashAttention, "cp", [](T(s)) { return s.setup.layout.cp > 1 && !s.setup.flash_attention; },
     [](T(s)) { return "cp = " + num(s.setup.layout.cp) + " needs flash_attention = true (ring attention runs a fused attention kernel)"; }},
    {Rule::TpWithinNode, "tp", [](TO(s, o)) { return o.tp_within_node && s.setup.layout.tp > s.cluster.gpus_per_node; },
     [](T(s)) {
         return "tp = " + num(s.setup.layout.tp) + " exceeds gpus_per_node = " + num(s.cluster.gpus_per_node) +
                " (tensor parallelism across nodes)";
     }},
    {Rule::PpVpWithinLayers, "pp", [](T(s)) { return s.setup.layout.split_units(s.model.num_layers) < chunks(s.setup.layout); },
     [](T(s)) { return "pp x vp = " + num(chunks(s.setup.layout)) + " exceeds num_layers = " + num(s.model.num_layers); }},
    {Rule::VpNeedsInterleaved, "vp", [](T(s)) { return s.setup.layout.vp > 1 && s.setup.layout.schedule != Schedule::Interleaved; },
     [](T(s)) { return "vp = " + num(s.setup.layout.vp) + " needs the interleaved schedule (schedule = \"interleaved\")"; }},
    {Rule::InterleavedNeedsPp, "schedule",
     [](T(s)) { return s.setup.layout.schedule == Schedule::Interleaved && s.setup.layout.pp < 2; },
     [](T(s)) { return "the interleaved schedule needs pp >= 2, got pp = " + num(s.setup.layout.pp); }},
    {Rule::InterleavedDividesLayers, "vp",
     [](T(s)) {
         const ParallelLayout& p = s.setup.layout;
         return p.schedule == Schedule::Interleaved && p.pp >= 2 && p.split_units(s.model.num_layers) % chunks(p) != 0;
     },
     [](T(s)) {
         const ParallelLayout& p = s.setup.layout;
         const std::string counted = p.split_units(s.model.num_layers) == s.model.num_layers
                                         ? "num_layers = " + num(s.model.num_layers)
                                         : "num_layers + counted embedding / loss = " + num(p.split_units(s.model.num_layers));
         return counted + " must be divisible by pp x vp = " + num(chunks(p)) + " for the interleaved schedule";
     }},
    // Megatron-Core get_num_layers_to_build asserts "num_layers should be
    // divisible by pipeline_model_parallel_size" after adding the counted units.
    {Rule::PipelineSplitDivides, "pp",
     [](T(s)) {
         const ParallelLayout& p = s.setup.layout;
         return (p.split_counts_embedding || p.split_counts_loss) && p.pp >= 2 && p.split_units(s.model.num_layers) % p.pp != 0;
     },
     [](T(s)) {
         return "num_layers + counted embedding / loss = " + num(s.setup.layout.split_units(s.model.num_layers)) +
                " must be divisible by pp = " + num(s.setup.layout.pp) +
                " (account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split)";
     }},
    {Rule::EpNeedsMoe, "ep", [](T(s)) { return s.setup.layout.ep > 1 && !s.model.is_moe(); },
     [](T(s)) { return "ep = " + num(s.setup.layout.ep) + " needs a mixture-of-experts model; " + s.model.name + " is dense"; }},
    {Rule::EpDividesExperts, "ep",
     [](T(s)) { return s.setup.layout.ep > 1 && s.model.is_moe() && s.model.moe.num_experts % s.setup.layout.ep != 0; },
     [](T(s)) { return "ep = " + num(s.setup.layout.ep) + " must divide num_experts = " + num(s.model.moe.num_experts); }},
    {Rule::EpDividesDp, "ep",
     [](T(s)) {
         const ParallelLayout& p = s.setup.layout;
         return p.ep > 1 && s.model.is_moe() && s.model.moe.num_experts % p.ep == 0 && p.dp % p.ep != 0;
     },
     [](T(s)) {
         return "ep = " + num(s.setup.layout.ep) + " must divide dp = " + num(s.setup.layout.dp) +
                " (experts are sharded inside the data-parallel group)";
     }},
    {Rule::GlobalBatchDivides, "global_batch",
     [](TO(s, o)) { return o.global_batch > 0 && o.global_batch % (s.setup.micro_batch * s.setup.layout.dp) != 0; },
     [](TO(s, o)) {
         return "global_batch = " + num(o.global_batch) + " must be a multiple of micro_batch x dp = " + num(s.setup.micro_batch) +
                " x " + num(s.setup.layout.dp);
     }},
    // Megatron-Core refuses an interleaved schedule whose micro-batch count is not a
    // multiple of the pipeline size: forward_backward_pipelining_with_interleaving
    // (megatron/core/pipeline_parallel/schedules.py, core v0.7) raises "number of
    // microbatches (m) is not divisible by pipeline-model-parallel-size (p) when
    // using interleaved schedule". In particular m < p is rejected.
    {Rule::InterleaveNeedsMicrobatches, "grad_accum",
     [](T(s)) {
         const ParallelLayout& p = s.setup.layout;
         return p.schedule == Schedule::Interleaved && p.pp >= 2 && s.setup.grad_accum % p.pp != 0;
     },
     [](T(s)) {
         return "grad_accum = " + num(s.setup.grad_accum) + " micro-batches per step must be a multiple of pp = " +
                num(s.setup.layout.pp) + " for the interleaved schedule (Megatron-LM rejects it)";
     }},
    {Rule::ZeroWithPipeline, "zero", [](T(s)) { return s.setup.zero_stage >= 2 && s.setup.layout.pp > 1; },
     [](T(s)) {
         return "zero = " + num(s.setup.zero_stage) + " cannot be combined with pp = " + num(s.setup.layout.pp) +
                " (DeepSpeed and Megatron allow only ZeRO-1 with pipeline parallelism)";
     }},
    {Rule::ParamOffloadNeedsZero3, "param_offload", [](T(s)) { return s.setup.param_offload != Offload::None && s.setup.zero_stage != 3; },
     [](T(s)) {
         return "param_offload = \"" + std::string(to_string(s.setup.param_offload)) +
                "\" needs zero = 3 (ZeRO-Infinity), got zero = " + num(s.setup.zero_stage);
     }},
    {Rule::OptimizerOffloadNeedsZero, "optimizer_offload",
     [](T(s)) { return s.setup.optimizer_offload != Offload::None && s.setup.zero_stage == 0; },
     [](T(s)) {
         return "optimizer_offload = \"" + std::string(to_string(s.setup.optimizer_offload)) +
                "\" needs zero >= 1 (ZeRO-Offload), got zero = 0";
     }},
    // torchtune refuses both: "Gradient accumulation is not supported with optimizer
    // in bwd" (recipes/full_finetune_single_device.py); the step runs inside backward,
    // so there is no accumulated gradient to step later, and no CPU step to hand it to.
    {Rule::OptimizerInBackwardNoAccumulation, "optimizer_in_backward",
     [](T(s)) { return s.setup.optimizer_in_backward && (s.setup.grad_accum > 1 || s.setup.optimizer_offload != Offload::None); },
     [](T(s)) {
         if (s.setup.optimizer_offload != Offload::None)
             return std::string("optimizer_in_backward = true cannot be combined with optimizer_offload = \"") +
                    to_string(s.setup.optimizer_offload) + "\" (the step runs on the GPU inside backward)";
         return "optimizer_in_backward = true needs grad_accum = 1, got grad_accum = " + num(s.setup.grad_accum) +
                " (each gradient is stepped and freed as backward produces it; torchtune refuses accumulation)";
     }},
    {Rule::LoraRankPositive, "lora_rank", [](T(s)) { return s.setup.method != Method::Full && s.setup.lora.rank < 1; },
     [](T(s)) { return at_least("lora_rank", s.setup.lora.rank, 1); }},
    {Rule::LoraTargetsNonEmpty, "lora_targets", [](T(s)) { return s.setup.method != Method::Full && s.setup.lora.targets == 0; },
     [](const Scenario&, const RuleOptions&) { return std::string("lora_targets must name at least one module"); }},
    {Rule::Fp8NeedsHardware, "precision",
     [](T(s)) { return s.setup.precision == Precision::FP8Mixed && s.cluster.gpu.fp8_flops <= 0; },
     [](T(s)) { return "precision = \"fp8-mixed\" needs FP8 tensor cores; " + s.cluster.gpu.name + " has none"; }},
    {Rule::Fp8ParamsNeedFp8, "fp8_params", [](T(s)) { return s.setup.fp8_params && s.setup.precision != Precision::FP8Mixed; },
     [](T(s)) {
         return std::string("fp8_params = true keeps the weights in FP8 and needs precision = \"fp8-mixed\", got precision = \"") +
                std::string(to_string(s.setup.precision)) + "\"";
     }},
    // peft's prepare_model_for_kbit_training upcasts only a bitsandbytes model's
    // float weights: it skips GPTQ models (is_gptq_quantized), and without a 4-bit
    // base there is nothing it prepares.
    {Rule::KbitUpcastNeedsBnb, "kbit_upcast",
     [](T(s)) { return s.setup.qlora.kbit_upcast && (s.setup.method != Method::QLoRA || s.setup.qlora.quant == QuantType::GPTQ); },
     [](T(s)) {
         return std::string("kbit_upcast = true (PEFT's prepare_model_for_kbit_training) needs method = \"qlora\" with a bitsandbytes base (quant nf4 or fp4), got method = \"") +
                std::string(to_string(s.setup.method)) + "\", quant = \"" + std::string(to_string(s.setup.qlora.quant)) + "\"";
     }},
    // Volta/Turing tensor cores take fp16 only: bf16 matmuls run on CUDA cores, slower
    // than fp32 (torch.matmul on a V100S: bf16 9.85 vs fp16 88.92 TFLOP/s,
    // zzc0721/torch-performance-test-data database.md). Refused rather than timed.
    {Rule::Bf16NeedsHardware, "precision",
     [](T(s)) {
         const Precision p = s.setup.precision;
         return (p == Precision::BF16 || p == Precision::BF16Mixed) && !s.cluster.gpu.has_bf16_tensor_cores();
     },
     [](T(s)) {
         return "precision = \"" + std::string(to_string(s.setup.precision)) + "\" needs BF16 tensor cores; " + s.cluster.gpu.name +
                " has fp16 tensor cores only (bf16 matmuls would run on CUDA cores, below the fp32 rate): use precision = \"fp16-mixed\"";
     }},
    {Rule::SeqWithinLearnedPositions, "seq_len",
     [](T(s)) { return s.model.position == PositionKind::Learned && s.setup.seq_len > s.model.max_seq_len; },
     [](T(s)) {
         return "seq_len = " + num(s.setup.seq_len) + " exceeds max_seq_len = " + num(s.model.max_seq_len) + " of " + s.model.name +
                " (learned position embeddings cannot extrapolate)";
     }},
    {Rule::GpuHasMemory, "gpu", [](T(s)) { return s.cluster.gpu.capacity_bytes <= 0; },
     [](T(s)) { return "GPU " + s.cluster.gpu.id + " has no memory capacity"; }},
    // The model parallelism the stack's model code and loop can run (data/defaults.toml
    // [stack.*]; transformers' model code under the Trainer, LitGPT's scripts: none).
    {Rule::StackTensorParallel, "tp",
     [](T(s)) { return (s.setup.layout.tp > 1 || s.setup.layout.sequence_parallel) && !caps(s).tensor_parallel; },
     [](T(s)) {
         return refused(s, s.setup.layout.tp > 1 ? "tp = " + num(s.setup.layout.tp) : std::string("sequence_parallel = true"),
                        &StackConventions::tensor_parallel);
     }},
    {Rule::StackContextParallel, "cp", [](T(s)) { return s.setup.layout.cp > 1 && !caps(s).context_parallel; },
     [](T(s)) { return refused(s, "cp = " + num(s.setup.layout.cp), &StackConventions::context_parallel); }},
    {Rule::StackPipelineParallel, "pp", [](T(s)) { return s.setup.layout.pp > 1 && !caps(s).pipeline_parallel; },
     [](T(s)) { return refused(s, "pp = " + num(s.setup.layout.pp), &StackConventions::pipeline_parallel); }},
    {Rule::StackExpertParallel, "ep", [](T(s)) { return s.setup.layout.ep > 1 && !caps(s).expert_parallel; },
     [](T(s)) { return refused(s, "ep = " + num(s.setup.layout.ep), &StackConventions::expert_parallel); }},
    {Rule::StackTpCommOverlap, "tp_comm_overlap", [](T(s)) { return s.setup.tp_comm_overlap && !caps(s).tp_comm_overlap; },
     [](T(s)) { return refused(s, "tp_comm_overlap = true", &StackConventions::tp_comm_overlap, false); }},
    {Rule::StackActivationOffload, "activation_offload", [](T(s)) { return s.setup.activation_offload && !caps(s).activation_offload; },
     [](T(s)) { return refused(s, "activation_offload = true", &StackConventions::activation_offload, false); }},
    {Rule::StackFusedLinearCe, "fused_linear_ce",
     [](T(s)) { return s.setup.fused_linear_ce.value_or(false) && !fused_linear_ce_runs(s.setup); },
     [](T(s)) {
         if (!caps(s).liger_loss) return refused(s, "fused_linear_ce = true", &StackConventions::liger_loss, false);
         return "fused_linear_ce = true needs tp = 1, got tp = " + num(s.setup.layout.tp) +
                " (Liger's fused linear cross-entropy computes the whole vocabulary on each rank: it is not vocabulary-parallel)";
     }},
};

#undef T
#undef TO

}  // namespace

const RuleInfo& rule_info(Rule r) { return kInfo[static_cast<std::size_t>(r)]; }

std::vector<Violation> check_rules(const Scenario& s, const RuleOptions& opt) {
    std::vector<Violation> out;
    for (const Check& c : kRanges)
        if (c.broken(s, opt)) out.push_back({c.rule, c.key, c.message(s, opt)});
    if (!out.empty()) return out;
    for (const Check& c : kStructural)
        if (c.broken(s, opt)) out.push_back({c.rule, c.key, c.message(s, opt)});
    return out;
}

std::optional<Rule> first_broken(const Scenario& s, RuleStage stage, const RuleOptions& opt) {
    for (const Check& c : kStructural)
        if (rule_info(c.rule).stage == stage && c.broken(s, opt)) return c.rule;
    return std::nullopt;
}

std::vector<Diagnostic> validate(const Scenario& s) {
    std::vector<Diagnostic> out;
    for (Violation& v : check_rules(s)) out.push_back({"", 0, 0, v.key, std::move(v.message)});
    return out;
}

}  // namespace trainplan
