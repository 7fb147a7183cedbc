#include "trainplan/model.hpp"

namespace trainplan {

// to_string(Activation / NormKind / PositionKind): enums.cpp, with their tables.

std::int64_t mlp_params(const ModelSpec& m, std::int64_t ffn) {
    const std::int64_t h = m.hidden;
    // Gated MLPs (SwiGLU/GeGLU) have gate, up and down matrices; GELU/ReLU MLPs two.
    std::int64_t p = (m.gated() ? 3 : 2) * h * ffn;
    if (m.mlp_bias) p += (m.gated() ? 2 * ffn : ffn) + h;
    return p;
}

std::int64_t vision_params(const VisionSpec& v, std::int64_t text_hidden) {
    if (v.num_layers <= 0) return 0;
    const std::int64_t h = v.hidden, f = v.ffn;
    // SiglipEncoderLayer: layer_norm1 and layer_norm2 (scale and shift), q, k, v and
    // out_proj with biases, fc1 and fc2 with biases.
    const std::int64_t layer = 2 * 2 * h + 4 * (h * h + h) + (h * f + f) + (f * h + h);
    // SiglipVisionEmbeddings: the patch convolution (with bias) and one learned
    // position per patch; post_layernorm.
    const std::int64_t side = v.patch > 0 ? v.image_size / v.patch : 0;
    const std::int64_t embed = v.channels * v.patch * v.patch * h + h + side * side * h;
    // SiglipMultiheadAttentionPoolingHead: probe, in_proj (3h x h + 3h), out_proj,
    // layernorm, MLP.
    const std::int64_t head = v.head ? h + 3 * h * h + 3 * h + h * h + h + 2 * h + (h * f + f) + (f * h + h) : 0;
    // Gemma3MultiModalProjector: mm_soft_emb_norm (RMSNorm over the vision width)
    // and mm_input_projection_weight (vision width x decoder width, no bias).
    const std::int64_t projector = h + h * text_hidden;
    return v.num_layers * layer + embed + 2 * h + head + projector;
}

ParamCounts count_params(const ModelSpec& m) {
    ParamCounts c;
    const std::int64_t h = m.hidden;
    const std::int64_t norm_params = (m.norm == NormKind::LayerNorm && m.norm_bias) ? 2 * h : h;

    c.attention = h * m.q_dim() + 2 * h * m.kv_dim() + m.q_dim() * h;
    if (m.qkv_bias) c.attention += m.q_dim() + 2 * m.kv_dim();
    if (m.out_bias) c.attention += h;

    if (m.is_moe()) {
        c.router = h * m.moe.num_experts;
        c.experts = m.moe.num_experts * mlp_params(m, m.moe.expert_ffn);
        c.shared_experts = m.moe.shared_experts * mlp_params(m, m.moe.shared_expert_ffn);
    } else {
        c.mlp = mlp_params(m, m.ffn);
    }
    c.layer_norms = m.norms_per_layer * norm_params + (m.qk_norm ? 2 * m.head_dim : 0);
    c.per_layer = c.attention + c.mlp + c.experts + c.shared_experts + c.router + c.layer_norms;

    c.embedding = m.vocab * h + (m.embedding_norm ? 2 * h : 0);
    c.positions = m.position == PositionKind::Learned ? m.max_seq_len * h : 0;
    c.lm_head = m.tied_embeddings ? 0 : m.vocab * h;
    if (m.lm_head_bias) c.lm_head += m.vocab;
    c.final_norm = m.final_norm ? norm_params : 0;

    c.vision = vision_params(m.vision, h);
    c.total = m.num_layers * c.per_layer + c.embedding + c.positions + c.lm_head + c.final_norm + c.vision;
    c.non_embedding = c.total - c.embedding - c.positions - c.lm_head;
    c.active = c.total;
    if (m.is_moe()) {
        const std::int64_t inactive = (m.moe.num_experts - m.moe.top_k) * mlp_params(m, m.moe.expert_ffn);
        c.active = c.total - m.num_layers * inactive;
    }
    return c;
}

}  // namespace trainplan
