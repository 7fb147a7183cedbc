#include "trainplan/intervals.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "trainplan/validation.hpp"

namespace trainplan {

std::optional<RatioBand> calibrated_band(const Calibration& c, BandKind k) {
    const double sd = k == BandKind::StepTime ? c.time_log_sd : c.memory_log_sd;
    const int dof = k == BandKind::StepTime ? c.time_dof : c.memory_dof;
    if (dof < 3) return std::nullopt;
    // 1.2816 = the standard normal's 90th percentile.
    RatioBand b;
    b.p10 = std::exp(-1.2816 * sd);
    b.p90 = std::exp(1.2816 * sd);
    b.n = dof;
    b.regime = std::string(k == BandKind::StepTime ? "step time" : "memory") + ", calibration residuals (" + std::to_string(dof) + " degrees of freedom)";
    return b;
}

std::string scale_of(const Scenario& s) {
    if (s.cluster.num_gpus <= 1) return "1 GPU";
    return s.cluster.num_gpus <= s.cluster.gpus_per_node ? "1 node" : "multi-node";
}

namespace {

// Linear-interpolated quantile (Hyndman & Fan type 7, numpy's default).
double quantile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    const double h = (static_cast<double>(v.size()) - 1) * q;
    const auto lo = static_cast<size_t>(std::floor(h));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (h - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace

namespace {

// The ratios of the most specific regime with enough cases (GPU generation x
// scale, then scale, then all of that kind), leaving out one source.
RatioBand select(const std::vector<IntervalTable::Entry>& entries, BandKind k, const std::string& arch, const std::string& scale,
                 const std::string& exclude) {
    const char* kind = k == BandKind::StepTime ? "step time" : "memory";
    for (int level = 0; level < 3; ++level) {
        std::vector<double> r;
        for (const auto& e : entries) {
            if (e.kind != k || (!exclude.empty() && e.source == exclude)) continue;
            if (level == 0 && (e.arch != arch || e.scale != scale)) continue;
            if (level == 1 && e.scale != scale) continue;
            r.push_back(e.ratio);
        }
        if (static_cast<int>(r.size()) < IntervalTable::kMinBand && level < 2) continue;
        RatioBand b;
        b.n = static_cast<int>(r.size());
        b.regime = level == 0   ? std::string(kind) + ", " + arch + ", " + scale
                   : level == 1 ? std::string(kind) + ", " + scale
                                : std::string(kind) + ", all";
        if (!r.empty()) {
            b.p10 = quantile(r, 0.1);
            b.p90 = quantile(r, 0.9);
        }
        return b;
    }
    return {};
}

// The regime's band, never narrower than the band of every case of that kind:
// leave-one-source-out, regime-only bands covered 73 % (time) and 66 % (memory)
// of the held-out cases, because one source's systematic error dominates a
// narrow regime; the pooled band alone covered 81 % / 79 %.
RatioBand widened(const std::vector<IntervalTable::Entry>& entries, BandKind k, const std::string& arch, const std::string& scale,
                  const std::string& exclude) {
    RatioBand b = select(entries, k, arch, scale, exclude);
    const RatioBand all = select(entries, k, "", "", exclude);
    if (all.n > 0 && all.n != b.n && (all.p10 < b.p10 || all.p90 > b.p90)) {
        b.p10 = std::min(b.p10, all.p10);
        b.p90 = std::max(b.p90, all.p90);
        b.regime += ", widened to all " + std::to_string(all.n);
    }
    return b;
}

}  // namespace

RatioBand IntervalTable::band(BandKind k, const Scenario& s, const std::string& exclude) const {
    return widened(entries, k, s.cluster.gpu.architecture, scale_of(s), exclude);
}

Result<IntervalTable> interval_table(const std::vector<TextSource>& files, PresetLookup& lookup) {
    auto cases = load_validation_cases(files);
    if (!cases) return cases.error();
    IntervalTable t;
    for (const ValidationCase& c : *cases) {
        if (!c.missing_mechanism.empty() || !c.missing_input.empty() || !c.scenario || !c.value) continue;
        auto s = resolve_scenario(*c.scenario, lookup);
        if (!s) continue;
        const auto pred = predict_case(c, *s);
        if (!pred || *pred <= 0) continue;
        IntervalTable::Entry e;
        e.id = c.id;
        e.source = c.source;
        e.arch = s->cluster.gpu.architecture;
        e.scale = scale_of(*s);
        if (c.kind == "memory") {
            e.kind = BandKind::Memory;
            e.ratio = *c.value / *pred;
        } else {
            e.kind = BandKind::StepTime;
            // Time metrics directly; rates (tokens/s, TFLOP/s, MFU, HFU) go as 1 / step time.
            const bool time = c.metric == CaseMetric::StepTime || c.metric == CaseMetric::LayerTime;
            e.ratio = time ? *c.value / *pred : *pred / *c.value;
        }
        t.entries.push_back(e);
    }
    return t;
}

Coverage interval_coverage(const IntervalTable& t, BandKind k) {
    Coverage cov;
    for (const auto& e : t.entries) {
        if (e.kind != k) continue;
        const RatioBand b = widened(t.entries, k, e.arch, e.scale, e.source);
        if (b.n == 0) continue;
        ++cov.n;
        if (e.ratio < b.p10) ++cov.below;
        else if (e.ratio > b.p90) ++cov.above;
        else ++cov.inside;
    }
    return cov;
}

namespace {

const char* kind_name(BandKind k) { return k == BandKind::Memory ? "memory" : "step_time"; }

std::string tsv_field(std::string v) {
    for (char& c : v)
        if (c == '\t' || c == '\n' || c == '\r') c = ' ';
    return v;
}

}  // namespace

std::string residuals_to_tsv(const IntervalTable& t) {
    std::string o =
        "# Measured / predicted of every counted validation case (validation/cases), the model's\n"
        "# residuals behind the P10-P90 bands `trainplan simulate` prints. Generated; regenerate with\n"
        "#   trainplan validate --write-residuals validation/residuals.tsv\n"
        "# kind\tarch\tscale\tratio\tid\tsource\n";
    for (const auto& e : t.entries) {
        char ratio[40];
        std::snprintf(ratio, sizeof ratio, "%.17g", e.ratio);
        o += std::string(kind_name(e.kind)) + '\t' + tsv_field(e.arch) + '\t' + tsv_field(e.scale) + '\t' + ratio + '\t' +
             tsv_field(e.id) + '\t' + tsv_field(e.source) + '\n';
    }
    return o;
}

Result<IntervalTable> parse_residuals_tsv(std::string_view text, const std::string& filename) {
    IntervalTable t;
    std::vector<Diagnostic> errs;
    int line_no = 0;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string_view::npos) end = text.size();
        const std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        ++line_no;
        if (line.empty() || line.front() == '#') continue;
        std::vector<std::string> f;
        size_t a = 0;
        while (true) {
            const size_t b = line.find('\t', a);
            f.emplace_back(line.substr(a, b == std::string_view::npos ? std::string_view::npos : b - a));
            if (b == std::string_view::npos) break;
            a = b + 1;
        }
        if (f.size() != 6) {
            errs.push_back({filename, line_no, 1, "", "expected 6 tab-separated fields (kind, arch, scale, ratio, id, source), got " +
                                                          std::to_string(f.size())});
            continue;
        }
        IntervalTable::Entry e;
        if (f[0] == "memory") e.kind = BandKind::Memory;
        else if (f[0] == "step_time") e.kind = BandKind::StepTime;
        else {
            errs.push_back({filename, line_no, 1, "kind", "kind = \"" + f[0] + "\" is not one of: step_time, memory"});
            continue;
        }
        char* stop = nullptr;
        e.ratio = std::strtod(f[3].c_str(), &stop);
        if (f[3].empty() || *stop != '\0' || !std::isfinite(e.ratio) || e.ratio <= 0) {
            errs.push_back({filename, line_no, 1, "ratio", "ratio = \"" + f[3] + "\" must be a positive finite number"});
            continue;
        }
        e.arch = f[1];
        e.scale = f[2];
        e.id = f[4];
        e.source = f[5];
        t.entries.push_back(std::move(e));
    }
    if (!errs.empty()) return Error(errs);
    return t;
}

}  // namespace trainplan
