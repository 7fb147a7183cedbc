#include "trainplan/validation.hpp"

#include <toml++/toml.h>

#include "toml_reader.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "trainplan/fit.hpp"
#include "trainplan/time.hpp"
#include "trainplan/units.hpp"

namespace trainplan {

bool ValidationReport::within_bounds() const {
    const bool mem = memory.count == 0 || (memory.median <= 0.05 && memory.worst <= 0.15);
    const bool thr = throughput.count == 0 || (throughput.median <= 0.10 && throughput.p90 <= 0.20);
    return mem && thr && verdicts_failed == 0;
}

const std::vector<std::string>& validation_stacks() {
    // The training stacks whose conventions differ (issue 11): loss implementation,
    // norm precision, fused element-wise ops, attention kernel, allocator.
    static const std::vector<std::string> v{"hf-peft",        "unsloth",   "litgpt",      "torchtitan", "torchtune",
                                            "deepspeed",      "megatron-lm", "megatron-core", "megatron-deepspeed", "nemo",
                                            "mosaic-composer", "colossalai", "metaseq",   "jax",        "generic-eager", "other"};
    return v;
}

const std::vector<std::string>& validation_regimes() {
    // Issue 11's eleven regimes, then the layouts the reference collection covers.
    static const std::vector<std::string> v{"loss-memory",  "sharded-dp", "context-parallel", "checkpointing",
                                            "fp8",          "qlora",      "consumer-rig",     "pipeline",
                                            "hardware",     "lora-mfu",   "allocator",        "3d-parallel",
                                            "data-parallel", "single-gpu"};
    return v;
}

namespace {

struct MetricName {
    const char* name;
    CaseMetric metric;
    const char* kind;
};
constexpr MetricName kMetrics[] = {
    {"peak_memory", CaseMetric::PeakMemory, "memory"},
    {"out_of_memory", CaseMetric::OutOfMemory, "memory"},
    {"fits_under", CaseMetric::FitsUnder, "memory"},
    {"step_time", CaseMetric::StepTime, "throughput"},
    {"layer_time", CaseMetric::LayerTime, "throughput"},
    {"tokens_per_s_per_gpu", CaseMetric::TokensPerSPerGpu, "throughput"},
    {"tokens_per_s", CaseMetric::TokensPerS, "throughput"},
    {"tflops_per_gpu", CaseMetric::TflopsPerGpu, "throughput"},
    {"mfu", CaseMetric::Mfu, "throughput"},
    {"hfu", CaseMetric::Hfu, "throughput"},
};
// The unit each metric's value is written in.
const char* metric_unit(CaseMetric m) {
    switch (m) {
        case CaseMetric::PeakMemory:
        case CaseMetric::OutOfMemory:
        case CaseMetric::FitsUnder: return "GB";
        case CaseMetric::StepTime: return "s";
        case CaseMetric::LayerTime: return "ms";
        case CaseMetric::TokensPerSPerGpu:
        case CaseMetric::TokensPerS: return "tok/s";
        case CaseMetric::TflopsPerGpu: return "TFLOP/s";
        case CaseMetric::Mfu:
        case CaseMetric::Hfu: return "%";
    }
    return "";
}

struct FormulaName {
    const char* name;
    FlopFormula formula;
};
constexpr FormulaName kFormulas[] = {{"6N+12Lhs", FlopFormula::PaLM},
                                     {"6P+12Lhs", FlopFormula::StatedParams},
                                     {"6P", FlopFormula::StatedParams6},
                                     {"megatron-eq3", FlopFormula::MegatronEq3}};

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
    return s;
}

// Typed reads from the [measured] table; a missing key is reported at the
// table's header line, a bad value at its own line.
class MeasuredReader {
public:
    MeasuredReader(const toml::table& t, std::string file, std::vector<Diagnostic>& errs) : t_(t), file_(std::move(file)), errs_(errs) {}

    void error_at(const toml::node* n, const std::string& key, const std::string& msg) {
        const auto& src = n ? n->source() : t_.source();
        errs_.push_back({file_, static_cast<int>(src.begin.line), static_cast<int>(src.begin.column), key, msg});
    }
    void error(const std::string& key, const std::string& msg) { error_at(t_.get(key), key, msg); }

    std::optional<std::string> string(const std::string& key, bool required) {
        known_.insert(key);
        const toml::node* n = t_.get(key);
        if (!n) {
            if (required) error_at(nullptr, key, "missing required key \"" + key + "\" in [measured]");
            return std::nullopt;
        }
        if (auto s = n->value_exact<std::string>(); s && !s->empty()) return *s;
        error_at(n, key, key + " must be a non-empty string");
        return std::nullopt;
    }
    std::optional<double> number(const std::string& key, bool required) {
        known_.insert(key);
        const toml::node* n = t_.get(key);
        if (!n) {
            if (required) error_at(nullptr, key, "missing required key \"" + key + "\" in [measured]");
            return std::nullopt;
        }
        std::optional<double> v;
        if (auto d = n->value_exact<double>()) v = *d;
        else if (auto i = n->value_exact<std::int64_t>()) v = static_cast<double>(*i);
        if (!v || !std::isfinite(*v) || *v <= 0) {
            error_at(n, key, key + " must be a positive number");
            return std::nullopt;
        }
        return v;
    }
    std::vector<std::string> strings(const std::string& key, bool required) {
        known_.insert(key);
        std::vector<std::string> out;
        const toml::node* n = t_.get(key);
        if (!n) {
            if (required) error_at(nullptr, key, "missing required key \"" + key + "\" in [measured]");
            return out;
        }
        const toml::array* a = n->as_array();
        if (a)
            for (const toml::node& e : *a)
                if (auto s = e.value_exact<std::string>()) out.push_back(*s);
        if (!a || out.size() != a->size() || (required && out.empty())) error_at(n, key, key + " must be a non-empty array of strings");
        return out;
    }
    void ignore(const std::string& key) { known_.insert(key); }
    void finish() {
        for (const auto& [k, node] : t_) {
            const std::string key(k.str());
            if (!known_.count(key)) error_at(&node, key, "unknown key \"" + key + "\" in [measured]");
        }
    }

private:
    const toml::table& t_;
    std::string file_;
    std::vector<Diagnostic>& errs_;
    std::set<std::string> known_;
};

std::string file_stem(const std::string& path) {
    std::string s = path.substr(path.find_last_of("/\\") + 1);
    if (auto dot = s.rfind('.'); dot != std::string::npos) s.resize(dot);
    return s;
}

// The [measured] table: what is compared, in which convention, from where.
void read_measured(const toml::table& m, const std::string& file, ValidationCase& c, std::vector<Diagnostic>& errs) {
    MeasuredReader r(m, file, errs);
    c.id = r.string("id", true).value_or("");
    if (!c.id.empty() && c.id != file_stem(file))
        r.error("id", "id = \"" + c.id + "\" must match the file name (" + file_stem(file) + ".toml)");
    c.kind = r.string("kind", true).value_or("");
    if (!c.kind.empty() && c.kind != "memory" && c.kind != "throughput") r.error("kind", "kind = \"" + c.kind + "\" is not one of: memory, throughput");
    c.metric_name = r.string("metric", true).value_or("");
    bool metric_known = false;
    for (const auto& mn : kMetrics)
        if (c.metric_name == mn.name) {
            c.metric = mn.metric;
            metric_known = true;
            if (!c.kind.empty() && c.kind != mn.kind)
                r.error("metric", "metric = \"" + c.metric_name + "\" is a " + mn.kind + " metric but kind = \"" + c.kind + "\"");
        }
    if (!c.metric_name.empty() && !metric_known) {
        std::vector<std::string> names;
        for (const auto& mn : kMetrics) names.emplace_back(mn.name);
        r.error("metric", "metric = \"" + c.metric_name + "\" is not one of: " + join(names));
    }
    c.value = r.number("value", metric_known && c.metric != CaseMetric::OutOfMemory);
    c.unit = r.string("unit", true).value_or("");
    if (metric_known && !c.unit.empty() && c.unit != metric_unit(c.metric))
        r.error("unit", "unit = \"" + c.unit + "\" must be \"" + metric_unit(c.metric) + "\" for metric = \"" + c.metric_name + "\"");
    const bool memory_metric = metric_known && c.metric == CaseMetric::PeakMemory;
    if (auto conv = r.string("memory_convention", memory_metric)) {
        if (*conv == "allocated") c.memory = MemoryConvention::Allocated;
        else if (*conv == "reserved") c.memory = MemoryConvention::Reserved;
        else if (*conv == "active") c.memory = MemoryConvention::Active;
        else if (*conv == "device") c.memory = MemoryConvention::Device;
        else r.error("memory_convention", "memory_convention = \"" + *conv + "\" is not one of: allocated, active, reserved, device");
    }
    const bool flop_metric = metric_known && (c.metric == CaseMetric::TflopsPerGpu || c.metric == CaseMetric::Mfu);
    if (auto ff = r.string("flop_formula", flop_metric)) {
        bool ok = false;
        for (const auto& fn : kFormulas)
            if (*ff == fn.name) { c.flops = fn.formula; ok = true; }
        if (!ok) r.error("flop_formula", "flop_formula = \"" + *ff + "\" is not one of: 6N+12Lhs, 6P+12Lhs, 6P, megatron-eq3");
    }
    c.params = r.number("params", c.flops == FlopFormula::StatedParams || c.flops == FlopFormula::StatedParams6);
    c.peak_tflops = r.number("peak_tflops", false);
    c.stack = r.string("stack", true).value_or("");
    const auto& stacks = validation_stacks();
    if (!c.stack.empty() && std::find(stacks.begin(), stacks.end(), c.stack) == stacks.end())
        r.error("stack", "stack = \"" + c.stack + "\" is not one of: " + join(stacks));
    c.regimes = r.strings("regimes", true);
    const auto& regimes = validation_regimes();
    for (const auto& g : c.regimes)
        if (std::find(regimes.begin(), regimes.end(), g) == regimes.end())
            r.error("regimes", "regime \"" + g + "\" is not one of: " + join(regimes));
    c.source = r.string("source", true).value_or("");
    c.source_locator = r.string("source_locator", true).value_or("");
    c.confidence = r.string("confidence", false).value_or("");
    c.collection = r.string("collection", true).value_or("");
    if (!c.collection.empty() && c.collection != "reference" && c.collection != "grown")
        r.error("collection", "collection = \"" + c.collection + "\" is not one of: reference, grown");
    c.missing_mechanism = r.string("missing_mechanism", false).value_or("");
    c.missing_input = r.string("missing_input", false).value_or("");
    // A left-out case names what is missing (design.md "Accuracy"), never "outlier".
    const std::pair<const char*, const std::string*> reasons[] = {{"missing_mechanism", &c.missing_mechanism}, {"missing_input", &c.missing_input}};
    for (const auto& [key, text] : reasons) {
        std::string lower = *text;
        std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
        if (lower.find("outlier") != std::string::npos) r.error(key, std::string(key) + " must name what is missing, not call the case an outlier");
    }
    if (m.contains("assumed")) c.assumed = r.strings("assumed", false);
    r.string("notes", false);
    r.ignore("as_published");  // the source's own fields, verbatim (provenance; never read)
    r.finish();
}

// The scenario sections, through the scenario parser. A counted case must be a
// complete scenario; a left-out one may carry only the configuration the model can express.
void read_scenario(const toml::table& doc, const TextSource& f, ValidationCase& c, std::vector<Diagnostic>& errs) {
    const bool has_scenario = doc.contains("model") || doc.contains("hardware") || doc.contains("training") || doc.contains("parallel");
    const bool left_out = !c.missing_mechanism.empty() || !c.missing_input.empty();
    if (has_scenario) {
        auto in = parse_scenario_toml(f.text, f.filename, {"measured"});
        if (!in) {
            for (const auto& d : in.error().diagnostics) errs.push_back(d);
        } else {
            c.scenario = *in;
        }
    }
    if (!left_out) {
        for (const char* sec : {"model", "hardware", "training"})
            if (!doc.contains(sec))
                errs.push_back({f.filename, c.line, 1, sec,
                                std::string("case \"") + c.id + "\" has no [" + sec +
                                    "]: a counted case is a complete scenario (or name its missing_mechanism / missing_input)"});
    }
}

// One case file: its scenario sections (through the scenario parser) and [measured].
std::optional<ValidationCase> load_case(const TextSource& f, std::vector<Diagnostic>& errs) {
    toml::table doc;
    if (auto err = detail::parse_document(f.text, f.filename, doc)) {
        errs.push_back(*err);
        return std::nullopt;
    }
    const toml::table* m = doc["measured"].as_table();
    if (!m) {
        errs.push_back({f.filename, 1, 1, "measured", "missing required table [measured] (metric, value, unit, source, ...)"});
        return std::nullopt;
    }
    const size_t errors_before = errs.size();
    ValidationCase c;
    c.file = f.filename;
    c.line = static_cast<int>(m->source().begin.line);
    read_measured(*m, f.filename, c, errs);
    read_scenario(doc, f, c, errs);
    if (errs.size() != errors_before) return std::nullopt;
    return c;
}

// Megatron-LM's FLOP count (Narayanan et al. 2021, Eq. 3), recompute included:
// 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per iteration.
double megatron_eq3_flops(const Scenario& s) {
    const double B = static_cast<double>(s.setup.global_batch()), sq = static_cast<double>(s.setup.seq_len);
    const double l = static_cast<double>(s.model.num_layers), h = static_cast<double>(s.model.hidden);
    const double V = static_cast<double>(s.model.vocab);
    return 96.0 * B * sq * l * h * h * (1.0 + sq / (6.0 * h) + V / (16.0 * l * h));
}

// Model FLOPs per token under a source's formula (each documented in FlopFormula).
double flops_per_token(const ValidationCase& c, const Scenario& s, const TimeEstimate& te) {
    const double attention = 12.0 * static_cast<double>(s.model.num_layers) * static_cast<double>(s.model.hidden) *
                             static_cast<double>(s.setup.seq_len);
    switch (c.flops) {
        case FlopFormula::StatedParams: return 6.0 * c.params.value_or(0) + attention;
        case FlopFormula::StatedParams6: return 6.0 * c.params.value_or(0);
        case FlopFormula::MegatronEq3:
            return megatron_eq3_flops(s) / s.setup.tokens_per_step();
        case FlopFormula::PaLM:
        case FlopFormula::None: break;
    }
    return te.throughput.model_flops_per_token;
}

std::string metric_label(const ValidationCase& c) {
    switch (c.metric) {
        case CaseMetric::PeakMemory:
            return c.memory == MemoryConvention::Allocated ? "peak allocated memory"
                   : c.memory == MemoryConvention::Active   ? "peak active memory"
                   : c.memory == MemoryConvention::Reserved ? "peak reserved memory"
                                                            : "device memory";
        case CaseMetric::OutOfMemory: return "out of memory";
        case CaseMetric::FitsUnder: return "fits";
        case CaseMetric::StepTime: return "iteration time";
        case CaseMetric::LayerTime: return "layer fwd+bwd";
        case CaseMetric::TokensPerSPerGpu: return "tokens/s per GPU";
        case CaseMetric::TokensPerS: return "tokens/s";
        case CaseMetric::TflopsPerGpu:
            return c.flops == FlopFormula::MegatronEq3 ? "TFLOP/s per GPU (Megatron Eq. 3, recompute counted)"
                                                       : "TFLOP/s per GPU (" + std::string(c.flops == FlopFormula::PaLM ? "6N + 12 L h s" : c.flops == FlopFormula::StatedParams ? "6P + 12 L h s" : "6P") + ")";
        case CaseMetric::Mfu:
            return c.flops == FlopFormula::PaLM ? "MFU (6N + 12 L h s)" : c.flops == FlopFormula::StatedParams ? "MFU (6P + 12 L h s)" : c.flops == FlopFormula::StatedParams6 ? "MFU (6P)" : "MFU (Megatron Eq. 3)";
        case CaseMetric::Hfu: return "HFU (recompute counted)";
    }
    return "";
}

void evaluate(const ValidationCase& c, const Scenario& s, ValidationRow& row) {
    row.metric = metric_label(c);
    row.unit = c.unit;
    const double published = c.value.value_or(0);
    if (c.kind == "memory") {
        if (c.metric == CaseMetric::FitsUnder) {
            const FitReport fr = check_fit(s);
            row.published = published;
            row.predicted = fr.estimate.peak().total / units::GB;
            row.verdict = true;
            row.verdict_ok = fr.fits;
            return;
        }
        const MemoryBreakdown mb = estimate_memory(s).peak();
        if (c.metric == CaseMetric::OutOfMemory) {
            row.published = mb.capacity / units::GB;
            row.predicted = mb.total / units::GB;
            row.verdict = true;
            row.verdict_ok = !mb.fits();
            return;
        }
        // Like with like: max_memory_allocated counts tensors only; reserved adds
        // the caching allocator's slack; the device (nvidia-smi) adds the CUDA
        // context and framework workspace too.
        const double bytes = c.memory == MemoryConvention::Allocated  ? mb.allocated
                             : c.memory == MemoryConvention::Active   ? mb.active()
                             : c.memory == MemoryConvention::Reserved ? mb.reserved()
                                                                      : mb.total;
        row.published = published;
        row.predicted = bytes / units::GB;
    } else {
        const TimeEstimate te = estimate_time(s);
        if (c.metric != CaseMetric::LayerTime) {
            const MemoryBreakdown mb = estimate_memory(s).peak();
            row.ran = true;
            row.ran_fits = mb.fits();
            row.ran_peak_gb = mb.total / units::GB;
            row.ran_capacity_gb = mb.capacity / units::GB;
        }
        const double gpus = s.cluster.num_gpus;
        const double tokens_per_s = te.throughput.tokens_per_s;
        const double peak_flops = c.peak_tflops ? *c.peak_tflops * units::TFLOPS : te.throughput.peak_flops;
        row.published = published;
        switch (c.metric) {
            case CaseMetric::LayerTime:
                row.predicted = (te.time.compute_s + te.time.tp_comm_s) / static_cast<double>(s.setup.grad_accum) /
                                static_cast<double>(s.model.num_layers) * 1e3;
                break;
            case CaseMetric::StepTime: row.predicted = te.time.step_s; break;
            case CaseMetric::TokensPerSPerGpu: row.predicted = tokens_per_s / gpus; break;
            case CaseMetric::TokensPerS: row.predicted = tokens_per_s; break;
            case CaseMetric::TflopsPerGpu: row.predicted = flops_per_token(c, s, te) * tokens_per_s / gpus / units::TFLOPS; break;
            case CaseMetric::Mfu:
                row.predicted = c.flops == FlopFormula::PaLM && !c.peak_tflops
                                    ? 100.0 * te.throughput.mfu
                                    : 100.0 * flops_per_token(c, s, te) * tokens_per_s / gpus / peak_flops;
                break;
            case CaseMetric::Hfu:
                row.predicted = c.peak_tflops ? 100.0 * te.throughput.hardware_flops_per_token * tokens_per_s / gpus / peak_flops
                                              : 100.0 * te.throughput.hfu;
                break;
            default: break;
        }
    }
    row.error = (row.predicted - row.published) / row.published;
    row.counted = true;
}

ValidationStats stats(const std::vector<double>& signed_errors) {
    ValidationStats s;
    s.count = static_cast<int>(signed_errors.size());
    if (signed_errors.empty()) return s;
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        const size_t n = v.size();
        return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    };
    std::vector<double> e;
    for (double x : signed_errors) e.push_back(std::fabs(x));
    std::sort(e.begin(), e.end());
    const size_t n = e.size();
    s.median = median(e);
    // Nearest-rank 90th percentile.
    s.p90 = e[static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n))) - 1];
    s.worst = e.back();
    s.bias = median(signed_errors);
    return s;
}

std::vector<ValidationGroup> group_by(const std::vector<ValidationRow>& rows, const std::vector<std::string>& order, bool by_regime) {
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> errs;
    std::map<std::string, int> left;
    for (const auto& r : rows) {
        const std::vector<std::string> keys = by_regime ? r.regimes : std::vector<std::string>{r.stack};
        for (const auto& k : keys) {
            if (r.counted) (r.kind == "memory" ? errs[k].first : errs[k].second).push_back(r.error);
            else if (!r.verdict) ++left[k];
        }
    }
    std::vector<ValidationGroup> out;
    for (const auto& name : order) {
        if (!errs.count(name) && !left.count(name)) continue;
        ValidationGroup g;
        g.name = name;
        g.memory = stats(errs[name].first);
        g.throughput = stats(errs[name].second);
        g.left_out = left.count(name) ? left[name] : 0;
        out.push_back(g);
    }
    return out;
}

}  // namespace

std::optional<double> predict_case(const ValidationCase& c, const Scenario& s) {
    if (c.metric == CaseMetric::OutOfMemory || c.metric == CaseMetric::FitsUnder || !c.value) return std::nullopt;
    ValidationRow row;
    evaluate(c, s, row);
    return row.predicted;
}

Result<std::vector<ValidationCase>> load_validation_cases(const std::vector<TextSource>& files) {
    std::vector<Diagnostic> errs;
    std::vector<ValidationCase> out;
    std::map<std::string, std::string> seen;
    for (const TextSource& f : files) {
        auto c = load_case(f, errs);
        if (!c) continue;
        if (auto it = seen.find(c->id); it != seen.end()) {
            errs.push_back({f.filename, c->line, 1, "id", "id = \"" + c->id + "\" is also the id of " + it->second});
            continue;
        }
        seen[c->id] = f.filename;
        out.push_back(std::move(*c));
    }
    if (!errs.empty()) return Error(errs);
    return out;
}

Result<std::vector<UnusableCase>> load_unusable_cases(const TextSource& f) {
    toml::table doc;
    if (auto err = detail::parse_document(f.text, f.filename, doc)) return Error(*err);
    std::vector<Diagnostic> errs;
    std::vector<UnusableCase> out;
    std::set<std::string> seen;
    for (const auto& [k, node] : doc) {
        if (k.str() != "case" || !node.is_array_of_tables()) {
            errs.push_back({f.filename, static_cast<int>(node.source().begin.line), 1, std::string(k.str()),
                            "unknown key \"" + std::string(k.str()) + "\": the list holds [[case]] tables only"});
            continue;
        }
        for (const auto& e : *node.as_array()) {
            const toml::table& t = *e.as_table();
            detail::TomlReader r(t, f.filename, "[[case]]", errs);
            UnusableCase u;
            u.id = r.string("id", true).value_or("");
            u.source = r.string("source", true).value_or("");
            u.source_locator = r.string("source_locator", true).value_or("");
            u.metric = r.string("metric", true).value_or("");
            u.unit = r.string("unit", true).value_or("");
            u.value = r.number("value", 0, 1e300, true).value_or(0);
            u.lacks = r.string("lacks", true).value_or("");
            u.notes = r.string("notes", false).value_or("");
            r.finish();
            if (!u.id.empty() && !seen.insert(u.id).second) r.error("id", "id = \"" + u.id + "\" is listed twice");
            out.push_back(std::move(u));
        }
    }
    if (!errs.empty()) return Error(errs);
    return out;
}

Result<std::vector<PublishedRun>> published_runs(const std::vector<TextSource>& files, PresetLookup& lookup) {
    auto cases = load_validation_cases(files);
    if (!cases) return cases.error();
    std::vector<PublishedRun> out;
    for (const ValidationCase& c : *cases) {
        if (c.kind != "throughput" || !c.scenario || !c.missing_mechanism.empty()) continue;
        if (auto s = resolve_scenario(*c.scenario, lookup)) out.push_back({c.id, *s});
    }
    return out;
}

Result<ValidationReport> run_validation(const std::vector<TextSource>& files, PresetLookup& lookup) {
    auto cases = load_validation_cases(files);
    if (!cases) return cases.error();
    ValidationReport rep;
    std::vector<double> mem, thr, grown_mem, grown_thr;
    for (const ValidationCase& c : *cases) {
        ValidationRow row;
        row.id = c.id;
        row.source = c.source;
        row.kind = c.kind;
        row.stack = c.stack;
        row.regimes = c.regimes;
        row.collection = c.collection;
        row.missing_mechanism = c.missing_mechanism;
        row.missing_input = c.missing_input;
        row.metric = metric_label(c);
        row.unit = c.unit;
        row.published = c.value.value_or(0);
        if (!c.missing_mechanism.empty() || !c.missing_input.empty()) {
            // Left out; where the scenario is expressible the prediction is still
            // shown, so implementing the mechanism shows how far it moves.
            if (c.scenario)
                if (auto s = resolve_scenario(*c.scenario, lookup)) evaluate(c, *s, row);
            row.counted = row.verdict = false;
            row.note = !c.missing_mechanism.empty() ? "missing mechanism: " + c.missing_mechanism : "missing input: " + c.missing_input;
        } else if (auto s = resolve_scenario(*c.scenario, lookup); !s) {
            row.note = "not a valid scenario: " + s.error().diagnostics.front().to_string();
        } else {
            evaluate(c, *s, row);
            row.note = join(c.assumed, "; ");
        }
        if (row.counted) {
            const bool grown = c.collection == "grown";
            (row.kind == "memory" ? (grown ? grown_mem : mem) : (grown ? grown_thr : thr)).push_back(row.error);
        }
        if (row.counted && row.ran) {
            ++rep.ran;
            if (!row.ran_fits) ++rep.ran_not_fitting;
        }
        if (row.verdict) {
            ++rep.verdicts;
            if (!row.verdict_ok) ++rep.verdicts_failed;
        }
        rep.rows.push_back(std::move(row));
    }
    rep.memory = stats(mem);
    rep.throughput = stats(thr);
    rep.grown_memory = stats(grown_mem);
    rep.grown_throughput = stats(grown_thr);
    std::vector<double> all_mem = mem, all_thr = thr;
    all_mem.insert(all_mem.end(), grown_mem.begin(), grown_mem.end());
    all_thr.insert(all_thr.end(), grown_thr.begin(), grown_thr.end());
    rep.all_memory = stats(all_mem);
    rep.all_throughput = stats(all_thr);
    rep.by_stack = group_by(rep.rows, validation_stacks(), false);
    rep.by_regime = group_by(rep.rows, validation_regimes(), true);
    return rep;
}

}  // namespace trainplan
