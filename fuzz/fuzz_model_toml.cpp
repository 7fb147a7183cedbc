// Model preset TOML: parse; a valid model must count, build its op graph and evaluate.
#include <string_view>

#include "fuzz_common.hpp"
#include "trainplan/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
    using namespace trainplan;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto m = parse_model_toml(text, "fuzz.toml", "fuzz");
    if (!m) {
        fuzz::require(!m.error().diagnostics.empty());
        return 0;
    }
    // Keep the evaluation bounded: huge shapes are valid but slow to walk for nothing.
    Scenario s;
    s.model = *m;
    static const auto gpu = load_gpu(fuzz::presets(), "h100-sxm", "gpu");
    s.cluster.gpu = *gpu;
    s.setup.seq_len = std::min<std::int64_t>(2048, s.model.max_seq_len);
    fuzz::evaluate(s);
    return 0;
}
