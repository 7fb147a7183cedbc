// Hugging Face config.json import.
#include <string_view>

#include "fuzz_common.hpp"
#include "trainplan/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
    using namespace trainplan;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto m = parse_hf_config(text, "config.json", "fuzz");
    if (!m) {
        fuzz::require(!m.error().diagnostics.empty());
        return 0;
    }
    Scenario s;
    s.model = *m;
    static const auto gpu = load_gpu(fuzz::presets(), "a100-sxm-80gb", "gpu");
    s.cluster.gpu = *gpu;
    s.setup.seq_len = std::min<std::int64_t>(2048, s.model.max_seq_len);
    fuzz::evaluate(s);
    return 0;
}
