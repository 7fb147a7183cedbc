#include "trainplan/training.hpp"

#include <string>

namespace trainplan {

const char* to_string(Method v) {
    switch (v) {
        case Method::Full: return "full";
        case Method::LoRA: return "lora";
        case Method::QLoRA: return "qlora";
    }
    return "?";
}
const char* to_string(Precision v) {
    switch (v) {
        case Precision::FP32: return "fp32";
        case Precision::FP16Mixed: return "fp16-mixed";
        case Precision::BF16Mixed: return "bf16-mixed";
        case Precision::BF16: return "bf16";
        case Precision::FP8Mixed: return "fp8-mixed";
    }
    return "?";
}
const char* to_string(OptimizerKind v) {
    switch (v) {
        case OptimizerKind::AdamW: return "adamw";
        case OptimizerKind::AdamW8bit: return "adamw-8bit";
        case OptimizerKind::SGD: return "sgd";
        case OptimizerKind::SGDMomentum: return "sgd-momentum";
        case OptimizerKind::Adafactor: return "adafactor";
        case OptimizerKind::Lion: return "lion";
    }
    return "?";
}
const char* to_string(Recompute v) {
    switch (v) {
        case Recompute::None: return "none";
        case Recompute::Selective: return "selective";
        case Recompute::Full: return "full";
    }
    return "?";
}
const char* to_string(Offload v) {
    switch (v) {
        case Offload::None: return "none";
        case Offload::CPU: return "cpu";
        case Offload::NVMe: return "nvme";
    }
    return "?";
}
const char* to_string(Schedule v) {
    switch (v) {
        case Schedule::OneF1B: return "1f1b";
        case Schedule::Interleaved: return "interleaved";
        case Schedule::GPipe: return "gpipe";
    }
    return "?";
}
const char* to_string(QuantType v) { return v == QuantType::NF4 ? "nf4" : "fp4"; }
const char* to_string(FsdpStrategy v) {
    switch (v) {
        case FsdpStrategy::None: return "none";
        case FsdpStrategy::FullShard: return "full-shard";
        case FsdpStrategy::ShardGradOp: return "shard-grad-op";
        case FsdpStrategy::HybridShard: return "hybrid-shard";
        case FsdpStrategy::NoShard: return "no-shard";
    }
    return "?";
}
const char* to_string(Framework v) {
    switch (v) {
        case Framework::DeepSpeed: return "deepspeed";
        case Framework::Megatron: return "megatron";
        case Framework::PyTorchAMP: return "pytorch-amp";
    }
    return "?";
}

const char* to_string(AttentionKernel v) {
    switch (v) {
        case AttentionKernel::Flash1: return "flash1";
        case AttentionKernel::Flash2: return "flash2";
        case AttentionKernel::Flash3: return "flash3";
    }
    return "?";
}

// validate() lives with the rule table in rules.cpp.

}  // namespace trainplan
