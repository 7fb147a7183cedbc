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

    c.total = m.num_layers * c.per_layer + c.embedding + c.positions + c.lm_head + c.final_norm;
    c.non_embedding = c.total - c.embedding - c.positions - c.lm_head;
    c.active = c.total;
    if (m.is_moe()) {
        const std::int64_t inactive = (m.moe.num_experts - m.moe.top_k) * mlp_params(m, m.moe.expert_ffn);
        c.active = c.total - m.num_layers * inactive;
    }
    return c;
}

}  // namespace trainplan
