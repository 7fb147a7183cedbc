// The enum tables (see enums.hpp): the one place each spelling is written.
#include "trainplan/enums.hpp"

#include <algorithm>
#include <bit>
#include <cctype>

namespace trainplan {

namespace {

std::string normalise(std::string_view s) {
    std::string r;
    r.reserve(s.size());
    for (char c : s) r += c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
}

bool in_list(const std::string& v, const char* list) {
    std::string_view l(list);
    while (!l.empty()) {
        const size_t comma = l.find(',');
        const std::string_view item = l.substr(0, comma);
        if (!item.empty() && normalise(item) == v) return true;
        if (comma == std::string_view::npos) break;
        l.remove_prefix(comma + 1);
    }
    return false;
}

#define TP_E(E, v) static_cast<int>(E::v)

constexpr EnumEntry kMethod[] = {
    {TP_E(Method, Full), "full", "", "train every weight"},
    {TP_E(Method, LoRA), "lora", "", "frozen 16-bit base, low-rank adapters (Hu et al. 2021)"},
    {TP_E(Method, QLoRA), "qlora", "", "frozen 4-bit base, low-rank adapters (Dettmers et al. 2023)"},
};
constexpr EnumEntry kPrecision[] = {
    {TP_E(Precision, FP32), "fp32", "", "fp32 weights and math"},
    {TP_E(Precision, FP16Mixed), "fp16-mixed", "fp16", "fp16 compute, fp32 master weights"},
    {TP_E(Precision, BF16Mixed), "bf16-mixed", "", "bf16 compute, fp32 master weights"},
    {TP_E(Precision, BF16), "bf16", "bf16-true,bf16-pure", "pure bf16 (no fp32 master copy)"},
    {TP_E(Precision, FP8Mixed), "fp8-mixed", "fp8", "FP8 GEMMs (Transformer Engine), bf16 elsewhere"},
};
constexpr EnumEntry kOptimizer[] = {
    {TP_E(OptimizerKind, AdamW), "adamw", "adam", "Adam/AdamW: 2 fp32 states"},
    {TP_E(OptimizerKind, AdamW8bit), "adamw-8bit", "adam-8bit,adamw8bit", "bitsandbytes 8-bit AdamW"},
    {TP_E(OptimizerKind, SGD), "sgd", "", "plain SGD: no state"},
    {TP_E(OptimizerKind, SGDMomentum), "sgd-momentum", "", "SGD with momentum: 1 fp32 state"},
    {TP_E(OptimizerKind, Adafactor), "adafactor", "", "factored second moments"},
    {TP_E(OptimizerKind, Lion), "lion", "", "Lion: 1 fp32 state"},
};
constexpr EnumEntry kRecompute[] = {
    {TP_E(Recompute, None), "none", "", "keep every activation"},
    {TP_E(Recompute, Selective), "selective", "", "recompute attention scores (Korthikanti et al. 2022)"},
    {TP_E(Recompute, Full), "full", "", "keep layer inputs only; recompute the forward"},
    {TP_E(Recompute, PerOp), "per-op", "op,selective-op",
     "torchtitan per-op selective: keep matmul / attention outputs, recompute every other matmul"},
};
constexpr EnumEntry kRecomputeMethod[] = {
    {TP_E(RecomputeMethod, Uniform), "uniform", "", "checkpoint every group of recompute_layers layers (Megatron-LM)"},
    {TP_E(RecomputeMethod, Block), "block", "", "checkpoint the first recompute_layers layers of each stage (Megatron-LM)"},
    {TP_E(RecomputeMethod, Every), "every", "every-kth", "checkpoint every recompute_layers-th layer (torchtitan selective_ac_option = k)"},
};
constexpr EnumEntry kOffload[] = {
    {TP_E(Offload, None), "none", "", "on the GPU"},
    {TP_E(Offload, CPU), "cpu", "", "host memory (ZeRO-Offload)"},
    {TP_E(Offload, NVMe), "nvme", "", "NVMe (ZeRO-Infinity)"},
};
constexpr EnumEntry kSchedule[] = {
    {TP_E(Schedule, OneF1B), "1f1b", "", "one forward, one backward"},
    {TP_E(Schedule, Interleaved), "interleaved", "", "interleaved 1F1B with vp chunks per stage"},
    {TP_E(Schedule, GPipe), "gpipe", "", "all forwards, then all backwards"},
};
constexpr EnumEntry kQuant[] = {
    {TP_E(QuantType, NF4), "nf4", "", "4-bit NormalFloat"},
    {TP_E(QuantType, FP4), "fp4", "", "4-bit float"},
    {TP_E(QuantType, GPTQ), "gptq", "gptq-int4", "GPTQ int4, group 128 (auto-gptq; dequantized with torch ops in training)"},
};
constexpr EnumEntry kFsdp[] = {
    {TP_E(FsdpStrategy, None), "none", "", "no FSDP (ZeRO stage applies)"},
    {TP_E(FsdpStrategy, FullShard), "full-shard", "", "shard weights, grads, states (like ZeRO-3)"},
    {TP_E(FsdpStrategy, ShardGradOp), "shard-grad-op", "", "shard grads and states (like ZeRO-2)"},
    {TP_E(FsdpStrategy, HybridShard), "hybrid-shard", "", "full shard inside a node, replicate across nodes"},
    {TP_E(FsdpStrategy, NoShard), "no-shard", "", "replicate (like DDP)"},
};
constexpr EnumEntry kFramework[] = {
    {TP_E(Framework, DeepSpeed), "deepspeed", "", "2 + 2 + 12 B per parameter (ZeRO paper)"},
    {TP_E(Framework, Megatron), "megatron", "", "fp32 main grads: 2 + 4 + 12 B per parameter"},
    {TP_E(Framework, PyTorchAMP), "pytorch-amp", "amp", "torch.autocast: fp32 weights and grads"},
};
constexpr EnumEntry kStack[] = {
    {TP_E(Stack, GenericEager), "generic-eager", "eager,pytorch", "plain PyTorch model code under torch.autocast"},
    {TP_E(Stack, HfPeft), "hf-peft", "hf,transformers,peft", "Hugging Face transformers / PEFT / Trainer"},
    {TP_E(Stack, HfFused), "hf-fused", "", "transformers with flash-attn CE / RMSNorm patched in (whyNLP/tinyllama)"},
    {TP_E(Stack, Unsloth), "unsloth", "", "Unsloth (Triton CE, RMSNorm, SwiGLU kernels)"},
    {TP_E(Stack, LitGPT), "litgpt", "lit-gpt,lightning", "LitGPT on Lightning Fabric"},
    {TP_E(Stack, LitGPT2023), "litgpt-2023.10", "lit-gpt-2023.10", "Lit-GPT up to 2023-10-24 (PR #606): RMSNorm in the activation dtype, no fp32 upcast"},
    {TP_E(Stack, Torchtitan), "torchtitan", "", "torchtitan (FSDP2, torch.compile optional)"},
    {TP_E(Stack, Torchtitan2025), "torchtitan-2025.09", "", "torchtitan up to 2025-10-14 (PR #1870): Qwen3's TP plan gathers q and k to every rank for their norms (NoParallel), RoPE then runs on all heads"},
    {TP_E(Stack, Torchtune), "torchtune", "", "torchtune recipes (chunked cross-entropy)"},
    {TP_E(Stack, Torchtune2024), "torchtune-2024.07", "", "torchtune recipes up to 2024-07-28 (PR #1235): cross-entropy on the whole fp32 logits, kept through backward"},
    {TP_E(Stack, DeepSpeed), "deepspeed", "", "DeepSpeed engine over Hugging Face model code"},
    {TP_E(Stack, MegatronCore), "megatron-core", "megatron,megatron-lm,nemo", "Megatron-LM / Megatron-Core / NeMo"},
    {TP_E(Stack, MegatronCore07), "megatron-core-0.7", "megatron-core-0.4,megatron-core-0.5,megatron-core-0.6", "Megatron-Core up to core_v0.7.0 (vocab-parallel cross-entropy subtracts the maximum out of place)"},
    {TP_E(Stack, MegatronLegacy), "megatron-legacy", "", "Megatron-LM's megatron/model before Megatron-Core (2020-2023) and its forks: Apex norms, eager SwiGLU and RoPE"},
    {TP_E(Stack, MegatronDeepSpeed), "megatron-deepspeed", "", "Microsoft's Megatron-DeepSpeed (legacy Megatron model code, DeepSpeed engine and activation checkpointing)"},
    {TP_E(Stack, LlmFoundry), "llm-foundry", "mosaic,composer,mosaic-composer", "MosaicML llm-foundry on Composer (PyTorch FSDP, flash-attn's fused cross-entropy)"},
    {TP_E(Stack, HfLiger), "hf-liger", "liger,liger-kernel", "transformers patched by Liger Kernel (use_liger_kernel / enable_liger_kernel): RMSNorm, RoPE, SwiGLU, fused linear cross-entropy"},
    {TP_E(Stack, FlashAttnTraining), "flash-attn-training", "flash-attn-gpt,hazyresearch", "Dao-AILab/flash-attention training/ GPT code: FlashAttention, fused dense + GELU epilogues, fused dropout-add-LayerNorm, in-place cross-entropy"},
};
constexpr EnumEntry kAttention[] = {
    {TP_E(AttentionKernel, Flash1), "flash1", "flash-attn-1", "FlashAttention 1"},
    {TP_E(AttentionKernel, Flash2), "flash2", "sdpa,flash-attn-2", "FlashAttention 2 / PyTorch SDPA (on ROCm: the CK / AOTriton ports)"},
    {TP_E(AttentionKernel, Flash3), "flash3", "cudnn,flash-attn-3", "FlashAttention 3 / cuDNN (Hopper); AITER fmha v3 (MI300X)"},
};
constexpr EnumEntry kHeldOutputs[] = {
    {TP_E(HeldOutputs, None), "none", "loss", "Only the loss (outputs dropped before backward)"},
    {TP_E(HeldOutputs, Logits), "logits", "", "Logits held through backward"},
    {TP_E(HeldOutputs, LogitsKv), "logits-kv", "logits-past-key-values", "Logits and past_key_values (use_cache) held through backward"},
};
constexpr EnumEntry kNccl[] = {
    {TP_E(NcclRelease, V2_19), "2.19", "2.17,2.18,2.17.1,2.18.1,2.18.3,2.18.5,2.18.6,2.19.3,2.19.4", "NCCL 2.17-2.19: NVLS buffers set up at init, on every communicator"},
    {TP_E(NcclRelease, V2_20), "2.20", "2.20.3,2.20.5", "NCCL 2.20: NVLS buffers set up at init, on single-node communicators only"},
    {TP_E(NcclRelease, V2_21), "2.21", "2.21.5", "NCCL 2.21: smaller NVLS buffers, set up at init, on every communicator"},
    {TP_E(NcclRelease, Current), "current", "2.22,2.23,2.24,2.25,2.26,2.27,2.28,2.29,2.30", "NCCL 2.22 and later: NVLS buffers allocated at the first NVLS collective"},
    {TP_E(NcclRelease, NvlsOff), "nvls-off", "no-nvls", "NCCL_NVLS_ENABLE=0: no NVLS buffers"},
};
constexpr EnumEntry kActivation[] = {
    {TP_E(Activation, SwiGLU), "swiglu", "silu-glu", "gated SiLU MLP (Llama)"},
    {TP_E(Activation, GeGLU), "geglu", "", "gated GELU MLP (Gemma)"},
    {TP_E(Activation, GELU), "gelu", "", "GELU MLP (GPT)"},
    {TP_E(Activation, ReLU), "relu", "", "ReLU MLP (OPT)"},
};
constexpr EnumEntry kNorm[] = {
    {TP_E(NormKind, RMSNorm), "rmsnorm", "", "RMSNorm"},
    {TP_E(NormKind, LayerNorm), "layernorm", "", "LayerNorm"},
};
constexpr EnumEntry kPosition[] = {
    {TP_E(PositionKind, RoPE), "rope", "", "rotary"},
    {TP_E(PositionKind, Learned), "learned", "", "learned absolute positions"},
    {TP_E(PositionKind, ALiBi), "alibi", "", "ALiBi"},
    {TP_E(PositionKind, None), "none", "", "none"},
};
constexpr EnumEntry kLinkKind[] = {
    {TP_E(LinkKind, PCIe), "pcie", "", "PCIe"},
    {TP_E(LinkKind, NVLink), "nvlink", "", "NVLink (point to point)"},
    {TP_E(LinkKind, NVSwitch), "nvswitch", "", "NVLink through NVSwitch"},
    {TP_E(LinkKind, InfiniBand), "infiniband", "", "InfiniBand"},
    {TP_E(LinkKind, RoCE), "roce", "", "RDMA over Converged Ethernet"},
    {TP_E(LinkKind, Ethernet), "ethernet", "", "TCP over Ethernet"},
    {TP_E(LinkKind, InfinityFabric), "infinity_fabric", "", "AMD Infinity Fabric"},
    {TP_E(LinkKind, ICI), "ici", "", "Google TPU inter-chip interconnect (torus)"},
};
#undef TP_E

// LoRA target modules and groups.
struct LoraName {
    unsigned mask;
    const char* name;
    const char* aliases;
};
constexpr LoraName kLoraNames[] = {
    {kLoraQ, "q", "q-proj,query"},           {kLoraK, "k", "k-proj,key"},
    {kLoraV, "v", "v-proj,value"},           {kLoraO, "o", "o-proj,out,projection"},
    {kLoraGate, "gate", "gate-proj"},        {kLoraUp, "up", "up-proj,fc1"},
    {kLoraDown, "down", "down-proj,fc2"},    {kLoraAll, "all", "all-linear"},
    {kLoraAttention, "attention", ""},       {kLoraMlp, "mlp", ""},
};

}  // namespace

std::optional<int> EnumTable::parse(std::string_view s) const {
    const std::string v = normalise(s);
    for (const EnumEntry& e : entries)
        if (v == normalise(e.name) || in_list(v, e.aliases)) return e.value;
    return std::nullopt;
}

const char* EnumTable::name(int value) const {
    for (const EnumEntry& e : entries)
        if (e.value == value) return e.name;
    return "?";
}

std::string EnumTable::allowed(const char* sep) const {
    std::string r;
    for (const EnumEntry& e : entries) r += (r.empty() ? "" : sep) + std::string(e.name);
    return r;
}

std::vector<std::string> EnumTable::names() const {
    std::vector<std::string> r;
    for (const EnumEntry& e : entries) r.emplace_back(e.name);
    return r;
}

#define TP_TABLE(E, what, arr)                             \
    template <>                                            \
    const EnumTable& enum_table<E>() {                     \
        static const EnumTable t{what, std::span(arr)};    \
        return t;                                          \
    }                                                      \
    const char* to_string(E v) { return enum_table<E>().name(static_cast<int>(v)); }
TP_TABLE(Method, "method", kMethod)
TP_TABLE(Precision, "precision", kPrecision)
TP_TABLE(OptimizerKind, "optimizer", kOptimizer)
TP_TABLE(Recompute, "recompute", kRecompute)
TP_TABLE(RecomputeMethod, "recompute method", kRecomputeMethod)
TP_TABLE(Offload, "offload", kOffload)
TP_TABLE(Schedule, "schedule", kSchedule)
TP_TABLE(QuantType, "quant", kQuant)
TP_TABLE(FsdpStrategy, "fsdp", kFsdp)
TP_TABLE(Framework, "framework", kFramework)
TP_TABLE(Stack, "stack", kStack)
TP_TABLE(AttentionKernel, "attention kernel", kAttention)
TP_TABLE(HeldOutputs, "held outputs", kHeldOutputs)
TP_TABLE(NcclRelease, "nccl", kNccl)
TP_TABLE(Activation, "activation", kActivation)
TP_TABLE(NormKind, "norm", kNorm)
TP_TABLE(PositionKind, "position", kPosition)
TP_TABLE(LinkKind, "link kind", kLinkKind)
#undef TP_TABLE

std::optional<unsigned> parse_lora_targets(std::string_view s) {
    unsigned mask = 0;
    std::string item;
    const std::string text = normalise(s) + ",";
    for (char c : text) {
        if (c != ',') {
            if (!std::isspace(static_cast<unsigned char>(c))) item += c;
            continue;
        }
        if (item.empty()) continue;
        const LoraName* hit = nullptr;
        for (const LoraName& n : kLoraNames)
            if (item == n.name || in_list(item, n.aliases)) hit = &n;
        if (!hit) return std::nullopt;
        mask |= hit->mask;
        item.clear();
    }
    if (mask == 0) return std::nullopt;
    return mask;
}

std::string lora_targets_to_string(unsigned mask) {
    // A whole group by its name, else the single modules in table order.
    for (const LoraName& n : kLoraNames)
        if (std::popcount(n.mask) > 1 && n.mask == mask) return n.name;
    std::string s;
    for (const LoraName& n : kLoraNames)
        if (std::popcount(n.mask) == 1 && (mask & n.mask)) s += (s.empty() ? "" : ",") + std::string(n.name);
    return s;
}

const char* lora_targets_allowed() {
    static const std::string text = [] {
        std::string single, groups;
        for (const LoraName& n : kLoraNames)
            (std::popcount(n.mask) == 1 ? single : groups) += std::string(std::popcount(n.mask) == 1 ? (single.empty() ? "" : ", ") : (groups.empty() ? "" : ", ")) + n.name;
        return single + " (or " + groups + ")";
    }();
    return text.c_str();
}

}  // namespace trainplan
