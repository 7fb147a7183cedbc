#include "trainplan/model.hpp"

namespace trainplan {

// to_string(Activation / NormKind / PositionKind): enums.cpp, with their tables.

namespace {

template <class N>
N mlp_count(const ModelSpec& m, N ffn) {
    const N h = static_cast<N>(m.hidden);
    // Gated MLPs (SwiGLU/GeGLU) have gate, up and down matrices; GELU/ReLU MLPs two.
    N p = (m.gated() ? 3 : 2) * h * ffn;
    if (m.mlp_bias) p += (m.gated() ? 2 * ffn : ffn) + h;
    return p;
}

template <class N>
N vision_count(const VisionSpec& v, N text_hidden) {
    if (v.num_layers <= 0) return 0;
    const N h = static_cast<N>(v.hidden), f = static_cast<N>(v.ffn);
    // SiglipEncoderLayer: layer_norm1 and layer_norm2 (scale and shift), q, k, v and
    // out_proj with biases, fc1 and fc2 with biases.
    const N layer = 2 * 2 * h + 4 * (h * h + h) + (h * f + f) + (f * h + h);
    // SiglipVisionEmbeddings: the patch convolution (with bias) and one learned
    // position per patch; post_layernorm.
    const N side = static_cast<N>(v.patch > 0 ? v.image_size / v.patch : 0);
    const N embed = static_cast<N>(v.channels * v.patch * v.patch) * h + h + side * side * h;
    // SiglipMultiheadAttentionPoolingHead: probe, in_proj (3h x h + 3h), out_proj,
    // layernorm, MLP.
    const N head = v.head ? h + 3 * h * h + 3 * h + h * h + h + 2 * h + (h * f + f) + (f * h + h) : 0;
    // Gemma3MultiModalProjector: mm_soft_emb_norm (RMSNorm over the vision width)
    // and mm_input_projection_weight (vision width x decoder width, no bias).
    const N projector = h + h * text_hidden;
    return static_cast<N>(v.num_layers) * layer + embed + 2 * h + head + projector;
}

template <class N>
BasicParamCounts<N> count(const ModelSpec& m) {
    BasicParamCounts<N> c;
    const N h = static_cast<N>(m.hidden), q = static_cast<N>(m.q_dim()), kv = static_cast<N>(m.kv_dim());
    const N norm_params = (m.norm == NormKind::LayerNorm && m.norm_bias) ? 2 * h : h;

    c.attention = h * q + 2 * h * kv + q * h;
    if (m.qkv_bias) c.attention += q + 2 * kv;
    if (m.out_bias) c.attention += h;

    if (m.is_moe()) {
        c.router = h * m.moe.num_experts;
        c.experts = m.moe.num_experts * mlp_count<N>(m, static_cast<N>(m.moe.expert_ffn));
        c.shared_experts = m.moe.shared_experts * mlp_count<N>(m, static_cast<N>(m.moe.shared_expert_ffn));
    } else {
        c.mlp = mlp_count<N>(m, static_cast<N>(m.ffn));
    }
    c.layer_norms = m.norms_per_layer * norm_params + static_cast<N>(m.qk_norm ? 2 * m.head_dim : 0);
    c.per_layer = c.attention + c.mlp + c.experts + c.shared_experts + c.router + c.layer_norms;

    const N vocab = static_cast<N>(m.vocab), layers = static_cast<N>(m.num_layers);
    c.embedding = vocab * h + (m.embedding_norm ? 2 * h : 0);
    c.positions = m.position == PositionKind::Learned ? static_cast<N>(m.max_seq_len) * h : 0;
    c.lm_head = m.tied_embeddings ? 0 : vocab * h;
    if (m.lm_head_bias) c.lm_head += m.vocab;
    c.final_norm = m.final_norm ? norm_params : 0;

    c.vision = vision_count<N>(m.vision, h);
    c.total = layers * c.per_layer + c.embedding + c.positions + c.lm_head + c.final_norm + c.vision;
    c.non_embedding = c.total - c.embedding - c.positions - c.lm_head;
    c.active = c.total;
    if (m.is_moe()) {
        const N inactive = (m.moe.num_experts - m.moe.top_k) * mlp_count<N>(m, static_cast<N>(m.moe.expert_ffn));
        c.active = c.total - layers * inactive;
    }
    return c;
}

}  // namespace

std::int64_t mlp_params(const ModelSpec& m, std::int64_t ffn) { return mlp_count<std::int64_t>(m, ffn); }
std::int64_t vision_params(const VisionSpec& v, std::int64_t text_hidden) { return vision_count<std::int64_t>(v, text_hidden); }
ParamCounts count_params(const ModelSpec& m) { return count<std::int64_t>(m); }
BasicParamCounts<long double> count_params_approx(const ModelSpec& m) { return count<long double>(m); }

}  // namespace trainplan
