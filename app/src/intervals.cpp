#include "trainplan/app/intervals.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "trainplan/units.hpp"

namespace fs = std::filesystem;

namespace trainplan::app {

std::optional<IntervalTable> residual_table(FilePresets& presets) {
    for (const auto& root : presets.roots()) {
        const std::string path = (fs::path(root) / "validation" / "residuals.tsv").string();
        std::error_code ec;
        if (!fs::is_regular_file(path, ec)) continue;
        std::string why;
        auto src = presets.read_file(path, why);
        if (!src) return std::nullopt;
        auto t = parse_residuals_tsv(src->text, src->filename);
        if (!t) return std::nullopt;
        return *t;
    }
    return std::nullopt;
}

std::optional<RatioBand> prediction_band(const std::optional<IntervalTable>& table, BandKind k, const Scenario& s) {
    if (auto cb = calibrated_band(s.calibration, k)) return cb;
    if (!table || table->entries.empty()) return std::nullopt;
    RatioBand b = table->band(k, s);
    if (b.n <= 0) return std::nullopt;
    return b;
}

std::string describe_calibration(const Calibration& k) {
    std::string changed;
    auto mult = [&](const char* name, double v) {
        if (v != 1) changed += fmt::format("{} x{:.3f}, ", name, v);
    };
    mult("GEMM", k.gemm);
    mult("attention", k.attention);
    mult("HBM", k.hbm);
    mult("intra-node link", k.intra_link);
    mult("inter-node link", k.inter_link);
    if (k.reserve_fraction != 0) changed += fmt::format("allocator reserve {:+.3f}, ", k.reserve_fraction);
    if (k.framework_bytes != 0) changed += fmt::format("framework {:+.2f} GiB, ", k.framework_bytes / units::GiB);
    return changed.empty() ? changed : changed.substr(0, changed.size() - 2);
}

}  // namespace trainplan::app
