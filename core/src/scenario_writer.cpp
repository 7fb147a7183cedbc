// Scenario -> scenario TOML (the format `trainplan --scenario` and the GUI read),
// generated from the schema: every saved field with a value in its section.
#include <sstream>

#include "trainplan/io.hpp"
#include "trainplan/schema.hpp"

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

std::string toml_number(double v) {
    std::string s = shortest(v);
    // A TOML float needs a fraction or an exponent.
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
    return s;
}

std::string toml_value(const Field& f, const FieldValue& v) {
    switch (f.rule.type) {
        case FieldType::Int: return std::to_string(std::get<std::int64_t>(v));
        case FieldType::Number: return toml_number(std::get<double>(v));
        case FieldType::Bool: return std::get<bool>(v) ? "true" : "false";
        case FieldType::Enum:
        case FieldType::LoraTargets:
        case FieldType::Text: return quoted(value_to_text(f.rule, v));
    }
    return "";
}

const char* tf(bool b) { return b ? "true" : "false"; }

// [model] as inline architecture keys (the model preset parser's keys).
void write_inline_model(std::ostream& o, const ModelSpec& m) {
    o << "name = " << quoted(m.name) << "\n";
    if (!m.source.empty()) o << "source = " << quoted(m.source) << "\n";
    if (!m.family.empty()) o << "family = " << quoted(m.family) << "\n";
    o << "num_layers = " << m.num_layers << "\nhidden_size = " << m.hidden << "\nnum_heads = " << m.num_heads
      << "\nnum_kv_heads = " << m.num_kv_heads << "\nhead_dim = " << m.head_dim << "\nffn_hidden_size = " << m.ffn
      << "\nvocab_size = " << m.vocab << "\nmax_seq_len = " << m.max_seq_len << "\nactivation = " << quoted(to_string(m.activation))
      << "\nnorm = " << quoted(to_string(m.norm)) << "\nnorm_bias = " << tf(m.norm_bias) << "\nnorms_per_layer = " << m.norms_per_layer
      << "\nqkv_bias = " << tf(m.qkv_bias) << "\npacked_qkv = " << tf(m.packed_qkv) << "\nout_bias = " << tf(m.out_bias) << "\nmlp_bias = " << tf(m.mlp_bias) << "\nqk_norm = " << tf(m.qk_norm)
      << "\nfinal_logit_softcap = " << toml_number(m.final_logit_softcap) << "\nattn_logit_softcap = " << toml_number(m.attn_logit_softcap)
      << "\nsliding_window = " << m.sliding_window << "\nsliding_window_global_every = " << m.sliding_window_global_every
      << "\nlm_head_bias = " << tf(m.lm_head_bias) << "\ntied_embeddings = " << tf(m.tied_embeddings)
      << "\nposition = " << quoted(to_string(m.position)) << "\nparallel_block = " << tf(m.parallel_block)
      << "\nembedding_norm = " << tf(m.embedding_norm) << "\nfinal_norm = " << tf(m.final_norm)
      << "\ndropout = " << toml_number(m.dropout) << "\nlogits_upcast = " << tf(m.logits_upcast) << "\n";
    if (m.reference_params > 0) o << "reference_params = " << m.reference_params << "\n";
    if (m.is_moe())
        o << "\n[model.moe]\nnum_experts = " << m.moe.num_experts << "\ntop_k = " << m.moe.top_k << "\nshared_experts = " << m.moe.shared_experts
          << "\nexpert_ffn_hidden_size = " << m.moe.expert_ffn << "\nshared_expert_ffn_hidden_size = " << m.moe.shared_expert_ffn << "\n";
    if (m.has_vision())
        o << "\n[model.vision]\nnum_layers = " << m.vision.num_layers << "\nhidden_size = " << m.vision.hidden << "\nffn_hidden_size = " << m.vision.ffn
          << "\npatch_size = " << m.vision.patch << "\nimage_size = " << m.vision.image_size << "\nchannels = " << m.vision.channels
          << "\nhead = " << tf(m.vision.head) << "\n";
}

}  // namespace

std::string scenario_to_toml(const Scenario& s, const std::string& model_ref) {
    std::ostringstream o;
    o << "# trainplan scenario\n[model]\n";
    if (!model_ref.empty()) {
        const bool path = model_ref.find('/') != std::string::npos || (model_ref.size() > 5 &&
                          (model_ref.ends_with(".toml") || model_ref.ends_with(".json")));
        o << (path ? "file = " : "preset = ") << quoted(model_ref) << "\n";
    } else {
        write_inline_model(o, s.model);
    }
    for (const std::string& section : scenario_sections()) {
        o << "\n[" << section << "]\n";
        for (const Field& f : scenario_fields()) {
            if (section != f.section || !f.saved || !f.read) continue;
            if (auto v = f.read(s)) o << f.key << " = " << toml_value(f, *v) << "\n";
        }
    }
    return o.str();
}

}  // namespace trainplan
