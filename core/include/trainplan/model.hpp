// Model architecture (ModelSpec) and exact parameter counting.
#pragma once

#include <cstdint>
#include <string>

namespace trainplan {

enum class Activation { SwiGLU, GeGLU, GELU, ReLU };
enum class NormKind { RMSNorm, LayerNorm };
enum class PositionKind { RoPE, Learned, ALiBi, None };

[[nodiscard]] const char* to_string(Activation a);
[[nodiscard]] const char* to_string(NormKind n);
[[nodiscard]] const char* to_string(PositionKind p);

struct MoESpec {
    int num_experts = 0;          // 0: dense model
    int top_k = 0;
    int shared_experts = 0;
    std::int64_t expert_ffn = 0;  // intermediate size of one expert
    std::int64_t shared_expert_ffn = 0;
};

// An image encoder beside the decoder, with the projector that feeds its patch
// features to the decoder (Gemma 3: a SigLIP ViT, transformers modeling_siglip.py
// SiglipVisionTransformer, and Gemma3MultiModalProjector). Its weights are part of
// the model (trained by a full fine-tune, frozen under LoRA); trainplan's batches
// are text, so it runs no FLOPs and stores no activations.
struct VisionSpec {
    std::int64_t num_layers = 0;  // 0: no vision encoder
    std::int64_t hidden = 0;
    std::int64_t ffn = 0;
    std::int64_t patch = 0;       // patch_size: a patch x patch x channels convolution
    std::int64_t image_size = 0;  // (image_size / patch)^2 learned position rows
    std::int64_t channels = 3;
    bool head = false;            // SigLIP's attention-pooling head (vision_use_head)
};

struct ModelSpec {
    std::string id;       // preset name or file the model came from
    std::string name;     // display name
    std::string source;   // where the figures come from
    std::string family;
    bool approximate = false;  // built from a size shorthand, not a real checkpoint

    std::int64_t num_layers = 0;
    std::int64_t hidden = 0;
    std::int64_t num_heads = 0;
    std::int64_t num_kv_heads = 0;
    std::int64_t head_dim = 0;
    std::int64_t ffn = 0;
    std::int64_t vocab = 0;
    std::int64_t max_seq_len = 0;

    Activation activation = Activation::SwiGLU;
    NormKind norm = NormKind::RMSNorm;
    bool norm_bias = false;
    int norms_per_layer = 2;
    bool qkv_bias = false;
    // One projection module computes q, k and v (GPT-2 / Qwen v1 c_attn, GPT-NeoX /
    // BLOOM / Falcon query_key_value, MPT Wqkv, Phi-3 qkv_proj): one GEMM and one
    // module, and LoRA on it is one adapter of r (h + q + 2 kv) (Hu et al. 2021).
    bool packed_qkv = false;
    bool out_bias = false;
    bool mlp_bias = false;
    // An RMSNorm over each attention head of q and of k, after the projections and
    // before RoPE (QK-norm: transformers' modeling_qwen3.py Qwen3Attention, q_norm and
    // k_norm = Qwen3RMSNorm(head_dim); Gemma 3 the same): one head_dim-wide scale each.
    bool qk_norm = false;
    // Logit soft-capping, cap * tanh(x / cap) (Gemma 2: transformers Gemma2ForCausalLM,
    // final_logit_softcapping = 30, on the LM head's output; Gemma2Attention,
    // attn_logit_softcapping = 50, on the attention scores before softmax). 0: none.
    double final_logit_softcap = 0.0;
    double attn_logit_softcap = 0.0;
    // Sliding-window attention: a layer attends the last `sliding_window` tokens
    // only (0: the whole sequence). Every `sliding_window_global_every`-th layer
    // attends globally (0: none; Gemma 2 alternates, 2; Gemma 3 one in 6;
    // Mistral-7B-v0.1 windows every layer).
    std::int64_t sliding_window = 0;
    int sliding_window_global_every = 0;
    bool tied_embeddings = false;
    PositionKind position = PositionKind::RoPE;
    bool parallel_block = false;
    bool embedding_norm = false;
    bool final_norm = true;
    bool lm_head_bias = false;
    double dropout = 0.0;  // > 0: dropout masks are stored for backward
    // The model code casts its logits to fp32 before its loss (transformers'
    // LlamaForCausalLM and most *ForCausalLM, v4.31-4.44: `logits = logits.float()`);
    // false where it computes the loss on the 16-bit logits (Qwen v1's
    // modeling_qwen.py). Read where the stack runs the model's own loss
    // (StackConventions::loss_in_model).
    bool logits_upcast = true;

    MoESpec moe;
    VisionSpec vision;
    std::int64_t reference_params = 0;  // published exact count, 0 if none

    [[nodiscard]] bool gated() const {
        return activation == Activation::SwiGLU || activation == Activation::GeGLU;
    }
    [[nodiscard]] bool is_moe() const { return moe.num_experts > 0; }
    [[nodiscard]] bool has_vision() const { return vision.num_layers > 0; }
    [[nodiscard]] std::int64_t q_dim() const { return num_heads * head_dim; }
    [[nodiscard]] std::int64_t kv_dim() const { return num_kv_heads * head_dim; }
};

// Exact parameter counts, split the way the memory model shards them. One
// formula (model.cpp) in two number types: 64-bit integers, exact, for every
// answer; long double, for check_model to refuse a model whose count would not
// fit the integers.
template <class N>
struct BasicParamCounts {
    // One transformer layer.
    N attention = 0;      // q, k, v, o weights and biases
    N mlp = 0;            // dense MLP (0 for MoE layers)
    N experts = 0;        // all routed experts of one layer
    N shared_experts = 0; // shared (always-active) experts of one layer
    N router = 0;
    N layer_norms = 0;
    N per_layer = 0;      // sum of the above

    N embedding = 0;      // token embedding (+ embedding norm)
    N positions = 0;      // learned position embedding
    N lm_head = 0;        // 0 when tied
    N final_norm = 0;
    N vision = 0;         // image encoder and its projector (VisionSpec)

    N total = 0;
    N active = 0;         // parameters touched per token (MoE: top-k experts)
    N non_embedding = 0;  // total minus embedding, positions and lm_head
};

using ParamCounts = BasicParamCounts<std::int64_t>;

[[nodiscard]] ParamCounts count_params(const ModelSpec& m);
[[nodiscard]] BasicParamCounts<long double> count_params_approx(const ModelSpec& m);

// Parameters of the image encoder and the projector into a decoder of hidden
// size `text_hidden` (0 without one).
[[nodiscard]] std::int64_t vision_params(const VisionSpec& v, std::int64_t text_hidden);

// Parameters of one (dense or expert) MLP of the given intermediate size.
[[nodiscard]] std::int64_t mlp_params(const ModelSpec& m, std::int64_t ffn);

}  // namespace trainplan
