// Size shorthand ("7b", "13b", "70b", "350m"): a Llama-shaped model of about
// that many parameters, marked approximate.
#include <cctype>
#include <cmath>
#include <string>

#include "trainplan/io.hpp"

namespace trainplan {

bool is_size_shorthand(std::string_view s) {
    if (s.size() < 2) return false;
    const char unit = static_cast<char>(std::tolower(static_cast<unsigned char>(s.back())));
    if (unit != 'b' && unit != 'm' && unit != 't') return false;
    bool digit = false, dot = false;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
        if (std::isdigit(static_cast<unsigned char>(s[i]))) digit = true;
        else if (s[i] == '.' && !dot) dot = true;
        else return false;
    }
    return digit;
}

Result<ModelSpec> model_from_shorthand(std::string_view s) {
    if (!is_size_shorthand(s))
        return Diagnostic{"", 0, 0, "model", "\"" + std::string(s) + "\" is not a size shorthand (e.g. 7b, 13b, 350m)"};
    const char unit = static_cast<char>(std::tolower(static_cast<unsigned char>(s.back())));
    const double scale = unit == 'm' ? 1e6 : unit == 'b' ? 1e9 : 1e12;
    const double target = std::stod(std::string(s.substr(0, s.size() - 1))) * scale;
    if (!(target >= 1e6 && target <= 1e14))
        return Diagnostic{"", 0, 0, "model", "size shorthand \"" + std::string(s) + "\" must be between 1m and 100t parameters"};

    // Width ladder of released Llama-family models (hidden, heads); depth is then
    // solved for the target count. Llama-2 conventions: SwiGLU with FFN ~8/3 h
    // rounded to 256, RMSNorm, RoPE, 32000 vocabulary, untied embeddings.
    struct Width { double params; std::int64_t hidden, heads; };
    static const Width ladder[] = {
        {0, 512, 8},           {2e8, 1024, 16},        {6e8, 2048, 16},        {2e9, 3072, 24},
        {5e9, 4096, 32},       {1e10, 5120, 40},       {2.5e10, 6656, 52},     {5e10, 8192, 64},
        {1.2e11, 12288, 96},   {3e11, 16384, 128},     {8e11, 20480, 160},     {2e12, 32768, 256},
        {8e12, 65536, 512},
    };
    Width w = ladder[0];
    for (const Width& x : ladder) if (target >= x.params) w = x;

    ModelSpec m;
    m.id = std::string(s);
    m.name = "Llama-shaped " + std::string(s) + " (approximate)";
    m.family = "llama";
    m.source = "size shorthand: Llama-2 architecture conventions, depth solved for the requested size";
    m.approximate = true;
    m.hidden = w.hidden;
    m.num_heads = w.heads;
    m.num_kv_heads = w.heads;
    m.head_dim = w.hidden / w.heads;
    m.ffn = ((w.hidden * 8 / 3 + 255) / 256) * 256;
    m.vocab = 32000;
    m.max_seq_len = 4096;
    m.activation = Activation::SwiGLU;
    m.norm = NormKind::RMSNorm;
    m.position = PositionKind::RoPE;
    const ParamCounts one = [&] { ModelSpec x = m; x.num_layers = 1; return count_params(x); }();
    const double fixed = static_cast<double>(one.embedding + one.lm_head + one.final_norm);
    m.num_layers = std::max<std::int64_t>(1, std::llround((target - fixed) / static_cast<double>(one.per_layer)));
    return m;
}

}  // namespace trainplan
