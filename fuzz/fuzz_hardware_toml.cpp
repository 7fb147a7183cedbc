// GPU, link and node preset TOML.
#include <string_view>

#include "fuzz_common.hpp"
#include "trainplan/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
    using namespace trainplan;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto g = parse_gpu_toml(text, "gpu.toml", "fuzz");
    auto l = parse_link_toml(text, "link.toml", "fuzz");
    auto n = parse_node_toml(text, "node.toml", "fuzz");
    if (!g) fuzz::require(!g.error().diagnostics.empty());
    if (!l) fuzz::require(!l.error().diagnostics.empty());
    if (!n) fuzz::require(!n.error().diagnostics.empty());
    if (g) {
        // A parsed GPU must carry a model through the whole evaluation.
        Scenario s;
        s.model = *model_from_shorthand("1b");
        s.cluster.gpu = *g;
        fuzz::evaluate(s);
    }
    return 0;
}
