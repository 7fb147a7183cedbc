// Scenario -> scenario TOML (the format `trainplan --scenario` and the GUI read).
#include <sstream>

#include "trainplan/io.hpp"

namespace trainplan {

namespace {

// A TOML basic string: quote, backslash and every control character escaped
// (TOML 1.0 forbids U+0000-U+001F and U+007F raw in basic strings), so anything
// written reads back as the same text.
std::string quoted(const std::string& v) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string o = "\"";
    for (char ch : v) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\b': o += "\\b"; break;
            case '\t': o += "\\t"; break;
            case '\n': o += "\\n"; break;
            case '\f': o += "\\f"; break;
            case '\r': o += "\\r"; break;
            default:
                if (c < 0x20 || c == 0x7f) o += std::string("\\u00") + kHex[c >> 4] + kHex[c & 15];
                else o += ch;
        }
    }
    return o + "\"";
}

std::string lora_targets(unsigned t) {
    if (t == kLoraAll) return "all";
    std::string s;
    const std::pair<unsigned, const char*> names[] = {{kLoraQ, "q"}, {kLoraK, "k"}, {kLoraV, "v"}, {kLoraO, "o"},
                                                      {kLoraGate, "gate"}, {kLoraUp, "up"}, {kLoraDown, "down"}};
    for (auto [bit, name] : names)
        if (t & bit) s += (s.empty() ? "" : ",") + std::string(name);
    return s;
}

}  // namespace

std::string scenario_to_toml(const Scenario& s, const std::string& model_ref) {
    std::ostringstream o;
    o.precision(12);
    const ModelSpec& m = s.model;
    o << "# trainplan scenario\n[model]\n";
    if (!model_ref.empty()) {
        const bool path = model_ref.find('/') != std::string::npos || model_ref.size() > 5 &&
                          (model_ref.ends_with(".toml") || model_ref.ends_with(".json"));
        o << (path ? "file = " : "preset = ") << quoted(model_ref) << "\n";
    } else {
        o << "name = " << quoted(m.name) << "\n";
        if (!m.source.empty()) o << "source = " << quoted(m.source) << "\n";
        o << "num_layers = " << m.num_layers << "\nhidden_size = " << m.hidden << "\nnum_heads = " << m.num_heads
          << "\nnum_kv_heads = " << m.num_kv_heads << "\nhead_dim = " << m.head_dim << "\nffn_hidden_size = " << m.ffn
          << "\nvocab_size = " << m.vocab << "\nmax_seq_len = " << m.max_seq_len << "\nactivation = " << quoted(to_string(m.activation))
          << "\nnorm = " << quoted(to_string(m.norm)) << "\nnorm_bias = " << (m.norm_bias ? "true" : "false")
          << "\nnorms_per_layer = " << m.norms_per_layer << "\nqkv_bias = " << (m.qkv_bias ? "true" : "false")
          << "\nout_bias = " << (m.out_bias ? "true" : "false") << "\nmlp_bias = " << (m.mlp_bias ? "true" : "false")
          << "\nlm_head_bias = " << (m.lm_head_bias ? "true" : "false") << "\ntied_embeddings = " << (m.tied_embeddings ? "true" : "false")
          << "\nposition = " << quoted(to_string(m.position)) << "\nparallel_block = " << (m.parallel_block ? "true" : "false")
          << "\nembedding_norm = " << (m.embedding_norm ? "true" : "false") << "\nfinal_norm = " << (m.final_norm ? "true" : "false")
          << "\ndropout = " << m.dropout << "\n";
        if (m.is_moe())
            o << "\n[model.moe]\nnum_experts = " << m.moe.num_experts << "\ntop_k = " << m.moe.top_k << "\nshared_experts = " << m.moe.shared_experts
              << "\nexpert_ffn_hidden_size = " << m.moe.expert_ffn << "\nshared_expert_ffn_hidden_size = " << m.moe.shared_expert_ffn << "\n";
    }
    const ClusterSpec& c = s.cluster;
    o << "\n[hardware]\ngpu = " << quoted(c.gpu.id) << "\ngpus = " << c.num_gpus << "\ngpus_per_node = " << c.gpus_per_node << "\n";
    if (!c.intra_node.id.empty()) o << "intra_node = " << quoted(c.intra_node.id) << "\n";
    if (!c.inter_node.id.empty()) o << "inter_node = " << quoted(c.inter_node.id) << "\n";
    if (c.nics_per_node > 0) o << "nics_per_node = " << c.nics_per_node << "\n";
    const TrainingSetup& t = s.setup;
    o << "\n[training]\nmethod = " << quoted(to_string(t.method)) << "\nprecision = " << quoted(to_string(t.precision))
      << "\noptimizer = " << quoted(to_string(t.optimizer)) << "\nframework = " << quoted(to_string(t.framework))
      << "\nzero = " << t.zero_stage << "\noptimizer_offload = " << quoted(to_string(t.optimizer_offload))
      << "\nparam_offload = " << quoted(to_string(t.param_offload)) << "\nrecompute = " << quoted(to_string(t.recompute))
      << "\nflash_attention = " << (t.flash_attention ? "true" : "false") << "\nattention_kernel = " << quoted(to_string(t.attention_kernel))
      << "\nseq_len = " << t.seq_len << "\nmicro_batch = " << t.micro_batch << "\ngrad_accum = " << t.grad_accum << "\n";
    if (t.method != Method::Full)
        o << "lora_rank = " << t.lora.rank << "\nlora_alpha = " << t.lora.alpha << "\nlora_dropout = " << t.lora.dropout
          << "\nlora_targets = " << quoted(lora_targets(t.lora.targets)) << "\n";
    if (t.method == Method::QLoRA)
        o << "quant = " << quoted(to_string(t.qlora.quant)) << "\ndouble_quant = " << (t.qlora.double_quant ? "true" : "false")
          << "\npaged_optimizer = " << (t.qlora.paged_optimizer ? "true" : "false") << "\n";
    const ParallelLayout& p = t.layout;
    o << "\n[parallel]\ntp = " << p.tp << "\npp = " << p.pp << "\ndp = " << p.dp << "\nep = " << p.ep << "\nvp = " << p.vp
      << "\nsequence_parallel = " << (p.sequence_parallel ? "true" : "false") << "\nschedule = " << quoted(to_string(p.schedule))
      << "\ntp_comm_overlap = " << (t.tp_comm_overlap ? "true" : "false") << "\n";
    return o.str();
}

}  // namespace trainplan
