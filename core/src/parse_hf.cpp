// Hugging Face config.json -> ModelSpec. Each model_type maps its own key names
// and conventions (norm, activation, biases, tied embeddings) onto ours.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "trainplan/input_limits.hpp"
#include "trainplan/io.hpp"

namespace trainplan {

namespace {

using json = nlohmann::json;

// Line of the first occurrence of "key" in the text (nlohmann does not keep positions).
int line_of(std::string_view text, const std::string& key, size_t from = 0) {
    const std::string needle = "\"" + key + "\"";
    const size_t pos = text.find(needle, from);
    if (pos == std::string_view::npos) return 0;
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
}

class JsonReader {
public:
    // `from`: where the object starts in the text (a nested one: its keys are
    // looked for after it).
    JsonReader(const json& j, std::string_view text, std::string file, std::vector<Diagnostic>& errs, size_t from = 0)
        : j_(j), text_(text), file_(std::move(file)), errs_(errs), from_(from) {}

    void error(const std::string& key, const std::string& msg) {
        errs_.push_back({file_, line_of(text_, key, from_), 0, key, msg});
    }
    bool has(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }

    // First present key of `keys`, as an integer in [lo, hi].
    std::optional<std::int64_t> integer(std::initializer_list<const char*> keys, std::int64_t lo, std::int64_t hi, bool required) {
        for (const char* k : keys) {
            if (!has(k)) continue;
            const json& v = j_[k];
            if (!v.is_number_integer()) {
                error(k, std::string(k) + " = " + v.dump() + " must be an integer");
                return std::nullopt;
            }
            const auto x = v.get<std::int64_t>();
            if (x < lo || x > hi) {
                error(k, std::string(k) + " = " + std::to_string(x) + (x < lo ? " must be at least " + std::to_string(lo) : " exceeds the maximum " + std::to_string(hi)));
                return std::nullopt;
            }
            return x;
        }
        if (required) {
            std::string names;
            for (const char* k : keys) names += (names.empty() ? "\"" : " or \"") + std::string(k) + "\"";
            errs_.push_back({file_, 0, 0, *keys.begin(), "missing required key " + names});
        }
        return std::nullopt;
    }
    std::optional<std::string> string(const char* key) {
        if (!has(key)) return std::nullopt;
        if (!j_[key].is_string()) { error(key, std::string(key) + " = " + j_[key].dump() + " must be a string"); return std::nullopt; }
        return j_[key].get<std::string>();
    }
    std::optional<bool> boolean(const char* key) {
        if (!has(key)) return std::nullopt;
        if (!j_[key].is_boolean()) { error(key, std::string(key) + " = " + j_[key].dump() + " must be true or false"); return std::nullopt; }
        return j_[key].get<bool>();
    }
    std::optional<double> number(const char* key) {
        if (!has(key) || !j_[key].is_number()) return std::nullopt;
        return j_[key].get<double>();
    }

private:
    const json& j_;
    std::string_view text_;
    std::string file_;
    std::vector<Diagnostic>& errs_;
    size_t from_ = 0;
};

constexpr std::int64_t kMaxDim = std::int64_t{1} << 22;

}  // namespace

namespace {
Result<ModelSpec> parse_hf_config_impl(std::string_view text, const std::string& filename, const std::string& id);
}  // namespace

Result<ModelSpec> parse_hf_config(std::string_view text, const std::string& filename, const std::string& id) {
    // nlohmann/json reports values it cannot represent (numbers beyond double,
    // wrong types inside nested objects) by exceptions; none may leave core.
    try {
        return parse_hf_config_impl(text, filename, id);
    } catch (const json::exception& e) {
        std::string what = e.what();
        if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
        return Diagnostic{filename, 0, 0, "", "invalid JSON value: " + what};
    }
}

namespace {

Result<ModelSpec> parse_hf_config_impl(std::string_view text, const std::string& filename, const std::string& id) {
    if (auto too_big = check_input_limits(text, filename, InputFormat::Json)) return *too_big;
    json j;
    try {
        j = json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
        // nlohmann reports a byte offset; turn it into line:column.
        const size_t off = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
        const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(off), '\n'));
        const size_t nl = text.rfind('\n', off > 0 ? off - 1 : 0);
        const int col = static_cast<int>(off - (nl == std::string_view::npos ? 0 : nl + 1)) + 1;
        std::string what = e.what();
        if (auto p = what.find("parse error"); p != std::string::npos) what = what.substr(p);
        return Diagnostic{filename, line, col, "", "invalid JSON: " + what};
    }
    if (!j.is_object()) return Diagnostic{filename, 1, 1, "", "config.json must hold a JSON object"};

    std::vector<Diagnostic> errs;
    // Gemma 3's multimodal checkpoints (4B, 12B, 27B: Gemma3ForConditionalGeneration,
    // model_type "gemma3") nest the decoder in text_config and the SigLIP encoder in
    // vision_config, each leaving out what its class defaults (transformers
    // configuration_gemma3.py Gemma3TextConfig, configuration_siglip.py
    // SiglipVisionConfig). The decoder is read as a gemma3_text config with those
    // defaults filled in (head_dim 256 is not hidden / heads there).
    json text_config;
    const json* vision_config = nullptr;
    if (j.contains("model_type") && j["model_type"] == "gemma3") {
        if (!j.contains("text_config") || !j["text_config"].is_object())
            return Diagnostic{filename, line_of(text, "model_type"), 0, "text_config",
                              "model_type = \"gemma3\" needs a \"text_config\" object (the decoder's settings)"};
        text_config = j["text_config"];
        const json defaults = {{"vocab_size", 262208}, {"hidden_size", 2304}, {"intermediate_size", 9216}, {"num_hidden_layers", 26},
                               {"num_attention_heads", 8}, {"num_key_value_heads", 4}, {"head_dim", 256},
                               {"max_position_embeddings", 131072}, {"tie_word_embeddings", true}, {"sliding_window", 4096},
                               {"sliding_window_pattern", 6}, {"hidden_activation", "gelu_pytorch_tanh"}};
        for (const auto& [k, v] : defaults.items())
            if (!text_config.contains(k) || text_config[k].is_null()) text_config[k] = v;
        text_config["model_type"] = "gemma3_text";
        if (j.contains("_name_or_path")) text_config["_name_or_path"] = j["_name_or_path"];
        if (j.contains("vision_config") && j["vision_config"].is_object()) vision_config = &j["vision_config"];
    }
    const json& c = text_config.is_null() ? j : text_config;
    const size_t text_at = text_config.is_null() ? std::string_view::npos : text.find("\"text_config\"");
    JsonReader r(c, text, filename, errs, text_at == std::string_view::npos ? 0 : text_at);
    ModelSpec m;
    m.id = id;
    m.source = filename + " (Hugging Face config.json)";

    const std::string type = r.string("model_type").value_or("");
    static const std::set<std::string> kTypes = {
        "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text", "phi3", "phi", "falcon",
        "gpt2", "gpt_neox", "gptj", "opt", "bloom", "mpt", "starcoder2", "gpt_bigcode", "olmo", "internlm2", "deepseek"};
    if (type.empty()) {
        errs.push_back({filename, 0, 0, "model_type", "missing required key \"model_type\" (decoder-only types: llama, mistral, mixtral, qwen2, gemma, gemma2, phi3, phi, falcon, gpt2, gpt_neox, gptj, opt, bloom, mpt, starcoder2, ...)"});
        return Error(errs);
    }
    if (!kTypes.count(type)) {
        r.error("model_type", "model_type = \"" + type + "\" is not supported (decoder-only types: llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, gemma, gemma2, gemma3_text, gemma3 (its text_config, with the vision encoder's weights), phi3, phi, falcon, gpt2, gpt_neox, gptj, opt, bloom, mpt, starcoder2, gpt_bigcode)");
        return Error(errs);
    }
    m.family = type;
    m.name = c.contains("_name_or_path") && c["_name_or_path"].is_string() ? c["_name_or_path"].get<std::string>() : id;

    if (auto v = r.integer({"num_hidden_layers", "n_layer", "num_layers", "n_layers"}, 1, 100000, true)) m.num_layers = *v;
    if (auto v = r.integer({"hidden_size", "n_embd", "d_model"}, 1, kMaxDim, true)) m.hidden = *v;
    if (auto v = r.integer({"num_attention_heads", "n_head", "n_heads", "num_heads"}, 1, 65536, true)) m.num_heads = *v;
    m.num_kv_heads = m.num_heads;
    if (auto v = r.integer({"num_key_value_heads", "num_kv_heads", "n_head_kv"}, 1, 65536, false)) m.num_kv_heads = *v;
    if (type == "falcon" && r.boolean("multi_query").value_or(false) && !r.has("num_kv_heads") && !r.has("new_decoder_architecture"))
        m.num_kv_heads = 1;
    if (type == "gpt_bigcode" && r.boolean("multi_query").value_or(true)) m.num_kv_heads = 1;
    if (auto v = r.integer({"head_dim"}, 1, 65536, false)) m.head_dim = *v;
    if (auto v = r.integer({"vocab_size", "padded_vocab_size"}, 1, std::int64_t{1} << 24, true)) m.vocab = *v;
    if (auto v = r.integer({"max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "n_ctx"}, 1, std::int64_t{1} << 26, false)) m.max_seq_len = *v;
    else m.max_seq_len = 2048;
    if (m.hidden > 0 && m.num_heads > 0 && m.head_dim == 0) m.head_dim = m.hidden / m.num_heads;

    // FFN size: intermediate_size, or the family's default multiple of hidden.
    if (auto v = r.integer({"intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"}, 1, kMaxDim, false)) m.ffn = *v;
    else if (type == "mpt" && c.contains("expansion_ratio") && c["expansion_ratio"].is_number()) m.ffn = static_cast<std::int64_t>(c["expansion_ratio"].get<double>() * static_cast<double>(m.hidden));
    else if (type == "mpt") m.ffn = 4 * m.hidden;  // MPT default expansion_ratio = 4
    else m.ffn = 4 * m.hidden;

    // Architecture conventions per family.
    const std::string act = r.string("hidden_act").value_or(r.string("activation_function").value_or(""));
    const bool llama_like = type == "llama" || type == "mistral" || type == "mixtral" || type == "qwen2" || type == "qwen2_moe" ||
                            type == "qwen3" || type == "qwen3_moe" || type == "phi3" || type == "olmo" || type == "internlm2" || type == "deepseek";
    const bool gemma = type == "gemma" || type == "gemma2" || type == "gemma3_text";
    if (llama_like || gemma) {
        m.norm = NormKind::RMSNorm;
        m.norm_bias = false;
        m.position = PositionKind::RoPE;
        m.activation = gemma ? Activation::GeGLU : Activation::SwiGLU;
        m.tied_embeddings = r.boolean("tie_word_embeddings").value_or(gemma);
        m.qkv_bias = r.boolean("attention_bias").value_or(type == "qwen2" || type == "qwen2_moe");
        m.out_bias = r.boolean("attention_bias").value_or(false);
        if (type == "qwen2" || type == "qwen2_moe") m.out_bias = false;
        m.mlp_bias = r.boolean("mlp_bias").value_or(false);
        // Gemma 2 and 3 norm before and after attention and MLP.
        if (type == "gemma2" || type == "gemma3_text") m.norms_per_layer = 4;
        // Gemma 2's soft-capping (null or absent: none).
        m.final_logit_softcap = std::max(0.0, r.number("final_logit_softcapping").value_or(0.0));
        m.attn_logit_softcap = std::max(0.0, r.number("attn_logit_softcapping").value_or(0.0));
        m.packed_qkv = type == "phi3";  // qkv_proj
        // Qwen3Attention and Gemma3Attention: q_norm / k_norm over head_dim.
        m.qk_norm = type == "qwen3" || type == "qwen3_moe" || type == "gemma3_text";
        // Sliding windows: Gemma 2 alternates local and global layers
        // (Gemma2DecoderLayer: is_sliding = not layer_idx % 2), Gemma 3 makes every
        // sliding_window_pattern-th layer global (default 6), Mistral windows every
        // layer where its config sets one (v0.1: 4096; later: null). (Qwen2's
        // use_sliding_window, off in its released configs, windows only the layers
        // above max_window_layers: not read.)
        const bool windowed = type == "gemma2" || type == "gemma3_text" || type == "mistral";
        if (windowed) {
            if (auto w = r.integer({"sliding_window"}, 1, std::int64_t{1} << 26, false)) m.sliding_window = *w;
            if (type == "gemma2") m.sliding_window_global_every = 2;
            if (type == "gemma3_text") m.sliding_window_global_every = static_cast<int>(r.integer({"sliding_window_pattern", "_sliding_window_pattern"}, 1, 100000, false).value_or(6));
        }
        // transformers 4.53 and later write each layer's kind out (layer_types:
        // "sliding_attention" / "full_attention"); where present it decides: the
        // global layers' count sets the period, none windows every layer, all none.
        if (c.contains("layer_types") && c["layer_types"].is_array() && m.num_layers > 0) {
            const auto& kinds = c["layer_types"];
            const auto full = std::count_if(kinds.begin(), kinds.end(), [](const json& k) { return k.is_string() && k.get<std::string>() == "full_attention"; });
            if (static_cast<std::int64_t>(kinds.size()) != m.num_layers) {
                r.error("layer_types", "layer_types lists " + std::to_string(kinds.size()) + " layers, num_hidden_layers = " + std::to_string(m.num_layers));
            } else if (full == m.num_layers) {
                m.sliding_window = 0;
                m.sliding_window_global_every = 0;
            } else if (m.sliding_window > 0) {
                m.sliding_window_global_every = full > 0 ? static_cast<int>((m.num_layers + full / 2) / full) : 0;
            }
        }
    } else if (type == "gpt2" || type == "gpt_bigcode") {
        m.norm = NormKind::LayerNorm; m.norm_bias = true; m.position = PositionKind::Learned;
        m.activation = Activation::GELU; m.qkv_bias = m.out_bias = m.mlp_bias = true;
        m.tied_embeddings = r.boolean("tie_word_embeddings").value_or(true);
        m.packed_qkv = true;  // c_attn
    } else if (type == "gpt_neox") {
        m.norm = NormKind::LayerNorm; m.norm_bias = true; m.position = PositionKind::RoPE;
        m.activation = Activation::GELU; m.qkv_bias = m.out_bias = m.mlp_bias = true;
        m.parallel_block = r.boolean("use_parallel_residual").value_or(true);
        m.tied_embeddings = r.boolean("tie_word_embeddings").value_or(false);
        m.packed_qkv = true;  // query_key_value
    } else if (type == "gptj") {
        m.norm = NormKind::LayerNorm; m.norm_bias = true; m.position = PositionKind::RoPE;
        m.activation = Activation::GELU; m.mlp_bias = true; m.parallel_block = true; m.norms_per_layer = 1;
        m.tied_embeddings = r.boolean("tie_word_embeddings").value_or(false); m.lm_head_bias = true;
    } else if (type == "opt") {
        m.norm = NormKind::LayerNorm; m.norm_bias = true; m.position = PositionKind::Learned;
        m.activation = act == "gelu" ? Activation::GELU : Activation::ReLU;
        m.qkv_bias = m.out_bias = m.mlp_bias = r.boolean("enable_bias").value_or(true);
        m.tied_embeddings = r.boolean("tie_word_embeddings").value_or(true);
        m.max_seq_len += 2;  // OPT's learned position table has an offset of 2 rows
    } else if (type == "bloom") {
        m.norm = NormKind::LayerNorm; m.norm_bias = true; m.position = PositionKind::ALiBi;
        m.activation = Activation::GELU; m.qkv_bias = m.out_bias = m.mlp_bias = true; m.embedding_norm = true;
        m.tied_embeddings = r.boolean("tie_word_embeddings").value_or(true);
        m.packed_qkv = true;  // query_key_value
    } else if (type == "mpt") {
        m.norm = NormKind::LayerNorm; m.norm_bias = !r.boolean("no_bias").value_or(true);
        const bool alibi = c.contains("attn_config") && c["attn_config"].is_object() && c["attn_config"].contains("alibi") &&
                           c["attn_config"]["alibi"].is_boolean() && c["attn_config"]["alibi"].get<bool>();
        m.position = alibi ? PositionKind::ALiBi : PositionKind::Learned;
        m.activation = Activation::GELU; m.qkv_bias = m.out_bias = m.mlp_bias = !r.boolean("no_bias").value_or(true);
        m.tied_embeddings = true;
        m.packed_qkv = true;  // Wqkv
    } else if (type == "falcon") {
        m.norm = NormKind::LayerNorm; m.norm_bias = true;
        m.position = r.boolean("alibi").value_or(false) ? PositionKind::ALiBi : PositionKind::RoPE;
        m.activation = Activation::GELU;
        m.qkv_bias = m.out_bias = m.mlp_bias = r.boolean("bias").value_or(false);
        m.parallel_block = r.boolean("parallel_attn").value_or(true);
        m.norms_per_layer = r.boolean("new_decoder_architecture").value_or(false) ? 2 : (m.parallel_block ? 1 : 2);
        m.packed_qkv = true;  // query_key_value
        m.tied_embeddings = r.boolean("tie_word_embeddings").value_or(true);
    } else if (type == "phi") {
        m.norm = NormKind::LayerNorm; m.norm_bias = true; m.position = PositionKind::RoPE;
        m.activation = Activation::GELU; m.qkv_bias = m.out_bias = m.mlp_bias = true;
        m.parallel_block = true; m.norms_per_layer = 1; m.lm_head_bias = true;
        m.tied_embeddings = r.boolean("tie_word_embeddings").value_or(false);
    } else if (type == "starcoder2") {
        m.norm = NormKind::LayerNorm; m.norm_bias = true; m.position = PositionKind::RoPE;
        m.activation = Activation::GELU;
        m.qkv_bias = m.out_bias = m.mlp_bias = r.boolean("use_bias").value_or(true);
        m.tied_embeddings = r.boolean("tie_word_embeddings").value_or(true);
    }
    if (!act.empty() && (act == "relu")) m.activation = Activation::ReLU;

    // Mixture of experts.
    auto experts = r.integer({"num_local_experts", "num_experts", "n_routed_experts"}, 1, 65536, false);
    if (experts && *experts > 1) {
        m.moe.num_experts = static_cast<int>(*experts);
        if (auto k = r.integer({"num_experts_per_tok", "top_k", "moe_top_k"}, 1, 65536, true)) m.moe.top_k = static_cast<int>(*k);
        m.moe.expert_ffn = m.ffn;
        if (auto f = r.integer({"moe_intermediate_size"}, 1, kMaxDim, false)) m.moe.expert_ffn = *f;
        m.moe.shared_expert_ffn = m.moe.expert_ffn;
        if (auto f = r.integer({"shared_expert_intermediate_size"}, 1, kMaxDim, false)) {
            m.moe.shared_experts = 1;
            m.moe.shared_expert_ffn = *f;
        }
        if (auto n = r.integer({"n_shared_experts"}, 0, 65536, false)) m.moe.shared_experts = static_cast<int>(*n);
    }
    if (vision_config) {
        // SiglipVisionConfig's defaults where vision_config leaves a key out.
        const size_t at = text.find("\"vision_config\"");
        JsonReader vr(*vision_config, text, filename, errs, at == std::string_view::npos ? 0 : at);
        m.vision.num_layers = vr.integer({"num_hidden_layers"}, 1, 100000, false).value_or(12);
        m.vision.hidden = vr.integer({"hidden_size"}, 1, kMaxDim, false).value_or(768);
        m.vision.ffn = vr.integer({"intermediate_size"}, 1, kMaxDim, false).value_or(3072);
        m.vision.patch = vr.integer({"patch_size"}, 1, 4096, false).value_or(16);
        m.vision.image_size = vr.integer({"image_size"}, 1, 1 << 20, false).value_or(224);
        m.vision.channels = vr.integer({"num_channels"}, 1, 64, false).value_or(3);
        m.vision.head = vr.boolean("vision_use_head").value_or(true);
    }
    if (auto p = r.number("attention_dropout")) m.dropout = std::max(m.dropout, *p);
    if (auto p = r.number("hidden_dropout")) m.dropout = std::max(m.dropout, *p);
    if (auto p = r.number("resid_pdrop")) m.dropout = std::max(m.dropout, *p);

    if (!errs.empty()) return Error(errs);
    for (const Diagnostic& d : check_model(m)) {
        const std::string key = d.key == "num_kv_heads" ? "num_key_value_heads" : d.key.rfind("vision.", 0) == 0 ? d.key.substr(7) : d.key;
        r.error(key, d.message);
    }
    if (!errs.empty()) return Error(errs);
    return m;
}

}  // namespace

}  // namespace trainplan
