// Run inputs for calibration: the logs users already have, parsed from text.
// Formats (from the tools' own sources):
//  - Megatron-LM / NeMo: megatron/training/training.py training_log() prints
//    " iteration   10/  500 | consumed samples: ... | elapsed time per iteration (ms): 1234.5 | ..."
//    and megatron/training/utils.py report_memory() prints
//    "[Rank 0] (after 10 iterations) memory (MB) | allocated: ... | max allocated: ... | reserved: ... | max reserved: ..."
//    with MB = 2^20 bytes. NeMo 1.x prints Lightning progress bars ending
//    "..., consumed_samples=640.0, train_step_timing in s=2.510]".
//  - Hugging Face Trainer: trainer_state.json {"log_history": [..., {"train_runtime": s,
//    "train_samples_per_second": x, "train_steps_per_second": y, ...}], "global_step": n},
//    or the dict the Trainer prints at the end of train().
//  - torchtitan: train.py logs "step: 10  loss:  7.1234  memory: 39.82GiB(50.34%)  tps: 6,543  tflops: ...  mfu: ...%"
//    (memory = max reserved GiB, tps = tokens/s per GPU; ANSI colours stripped).
//  - torchtune: metric loggers write "Step 10 | loss:1.23 lr:2e-05 tokens_per_second_per_gpu:1234.5
//    peak_memory_active:20.1 peak_memory_alloc:20.1 peak_memory_reserved:22.3" (GiB, training.get_memory_stats).
//  - torch.cuda.memory_summary(): rows "| Allocated memory | cur | peak | ... |" and
//    "| GPU reserved memory | ... |" with sizes "12345 MiB" (B, KiB, MiB, GiB, TiB).
#include <toml++/toml.h>

#include "toml_reader.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "trainplan/calibrate.hpp"
#include "trainplan/units.hpp"

namespace trainplan {

void Measured::merge(const Measured& o) {
    auto take = [](std::optional<double>& a, const std::optional<double>& b) { if (b) a = b; };
    take(step_s, o.step_s);
    take(tokens_per_s, o.tokens_per_s);
    take(tokens_per_s_per_gpu, o.tokens_per_s_per_gpu);
    take(samples_per_s, o.samples_per_s);
    take(peak_allocated_bytes, o.peak_allocated_bytes);
    take(peak_reserved_bytes, o.peak_reserved_bytes);
    take(device_bytes, o.device_bytes);
    if (!o.format.empty()) format = format.empty() ? o.format : format + "+" + o.format;
    if (file.empty()) { file = o.file; line = o.line; }
    samples = std::max(samples, o.samples);
}

bool Measured::empty() const {
    return !step_s && !tokens_per_s && !tokens_per_s_per_gpu && !samples_per_s && !peak_allocated_bytes && !peak_reserved_bytes &&
           !device_bytes;
}

const char* to_string(LogFormat f) {
    switch (f) {
        case LogFormat::Auto: return "auto";
        case LogFormat::Megatron: return "megatron";
        case LogFormat::HfTrainer: return "hf-trainer";
        case LogFormat::Torchtitan: return "torchtitan";
        case LogFormat::Torchtune: return "torchtune";
        case LogFormat::MemorySummary: return "memory-summary";
    }
    return "";
}

std::optional<LogFormat> parse_log_format(std::string_view n) {
    for (LogFormat f : {LogFormat::Auto, LogFormat::Megatron, LogFormat::HfTrainer, LogFormat::Torchtitan, LogFormat::Torchtune,
                        LogFormat::MemorySummary})
        if (n == to_string(f)) return f;
    if (n == "nemo") return LogFormat::Megatron;
    return std::nullopt;
}

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

// Lines with their 1-based numbers; ANSI colour escapes removed.
std::vector<std::pair<int, std::string>> lines_of(std::string_view text) {
    std::vector<std::pair<int, std::string>> out;
    int n = 0;
    size_t pos = 0;
    while (pos <= text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string_view::npos) end = text.size();
        std::string raw(text.substr(pos, end - pos));
        ++n;
        std::string line;
        for (size_t i = 0; i < raw.size(); ++i) {
            if (raw[i] == '\x1b' && i + 1 < raw.size() && raw[i + 1] == '[') {
                i += 2;
                while (i < raw.size() && !std::isalpha(static_cast<unsigned char>(raw[i]))) ++i;
                continue;
            }
            if (raw[i] != '\r') line += raw[i];
        }
        out.emplace_back(n, std::move(line));
        if (end == text.size()) break;
        pos = end + 1;
    }
    return out;
}

// The number right after `key` (spaces skipped; thousands separators allowed
// when `commas`). nullopt when the key is absent; NaN when the key is there but
// no number follows it.
std::optional<double> number_after(const std::string& line, const std::string& key, bool commas = false, size_t* end_pos = nullptr) {
    const size_t k = line.find(key);
    if (k == std::string::npos) return std::nullopt;
    size_t i = k + key.size();
    while (i < line.size() && line[i] == ' ') ++i;
    std::string digits;
    size_t j = i;
    while (j < line.size() && (std::isdigit(static_cast<unsigned char>(line[j])) || line[j] == '.' || line[j] == 'e' || line[j] == 'E' ||
                               line[j] == '+' || line[j] == '-' || (commas && line[j] == ','))) {
        if (line[j] != ',') digits += line[j];
        ++j;
    }
    if (end_pos) *end_pos = j;
    double v = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size() || !std::isfinite(v))
        return std::numeric_limits<double>::quiet_NaN();
    return v;
}

double median_warm(std::vector<double> v) {
    // The first logged interval includes warm-up (compilation, allocator growth).
    if (v.size() >= 3) v.erase(v.begin());
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Diagnostic diag(const std::string& file, int line, const std::string& key, const std::string& msg) { return {file, line, 1, key, msg}; }

bool contains(const std::string& s, const char* k) { return s.find(k) != std::string::npos; }

// A positive finite value for `key` on a line that has it, else a diagnostic.
bool need_positive(const std::optional<double>& v, const std::string& file, int line, const std::string& key, std::vector<Diagnostic>& errs) {
    if (!v) {
        errs.push_back(diag(file, line, key, "line has no \"" + key + "\" figure"));
        return false;
    }
    if (!std::isfinite(*v) || *v <= 0) {
        errs.push_back(diag(file, line, key, "\"" + key + "\" must be followed by a positive number"));
        return false;
    }
    return true;
}

Result<Measured> finish(Measured m, std::vector<Diagnostic>& errs, const std::string& file, const char* what) {
    if (!errs.empty()) return Error(errs);
    if (m.empty()) return diag(file, 1, "", std::string("no ") + what + " found (is this the right log format?)");
    m.file = file;
    return m;
}

Result<Measured> parse_megatron(const std::string& file, std::string_view text) {
    Measured m;
    m.format = "megatron";
    std::vector<Diagnostic> errs;
    std::vector<double> steps;
    for (const auto& [n, line] : lines_of(text)) {
        if (contains(line, " iteration ") && contains(line, "consumed samples")) {
            if (m.line == 0) m.line = n;
            const auto ms = number_after(line, "elapsed time per iteration (ms):");
            if (need_positive(ms, file, n, "elapsed time per iteration (ms)", errs)) steps.push_back(*ms / 1e3);
        } else if (contains(line, "train_step_timing in s=")) {
            // NeMo 1.x (PyTorch Lightning progress bar): "..., train_step_timing in s=2.510]"
            if (m.line == 0) m.line = n;
            const auto st = number_after(line, "train_step_timing in s=");
            if (need_positive(st, file, n, "train_step_timing in s", errs)) steps.push_back(*st);
        } else if (contains(line, "memory (MB)")) {
            if (m.line == 0) m.line = n;
            const auto alloc = number_after(line, "| max allocated:");
            const auto res = number_after(line, "| max reserved:");
            if (need_positive(alloc, file, n, "max allocated", errs))
                m.peak_allocated_bytes = std::max(m.peak_allocated_bytes.value_or(0), *alloc * kMiB);
            if (need_positive(res, file, n, "max reserved", errs))
                m.peak_reserved_bytes = std::max(m.peak_reserved_bytes.value_or(0), *res * kMiB);
        }
    }
    if (!steps.empty()) {
        m.step_s = median_warm(steps);
        m.samples = static_cast<int>(steps.size());
    }
    return finish(m, errs, file, "Megatron \"iteration ... | elapsed time per iteration (ms): ...\" or \"memory (MB)\" lines");
}

Result<Measured> parse_torchtitan(const std::string& file, std::string_view text) {
    Measured m;
    m.format = "torchtitan";
    std::vector<Diagnostic> errs;
    std::vector<double> tps;
    for (const auto& [n, line] : lines_of(text)) {
        const size_t s = line.find("step:");
        if (s == std::string::npos || !contains(line, "loss:")) continue;
        if (m.line == 0) m.line = n;
        const auto t = number_after(line, "tps:", true);
        if (need_positive(t, file, n, "tps", errs)) tps.push_back(*t);
        size_t end = 0;
        const auto mem = number_after(line, "memory:", false, &end);
        if (need_positive(mem, file, n, "memory", errs)) {
            if (line.compare(end, 3, "GiB") != 0) errs.push_back(diag(file, n, "memory", "\"memory\" must be in GiB (\"39.82GiB(50.34%)\")"));
            else m.peak_reserved_bytes = std::max(m.peak_reserved_bytes.value_or(0), *mem * kGiB);
        }
    }
    if (!tps.empty()) {
        m.tokens_per_s_per_gpu = median_warm(tps);
        m.samples = static_cast<int>(tps.size());
    }
    return finish(m, errs, file, "torchtitan \"step: N  loss: ...  memory: ...GiB  tps: ...\" lines");
}

Result<Measured> parse_torchtune(const std::string& file, std::string_view text) {
    Measured m;
    m.format = "torchtune";
    std::vector<Diagnostic> errs;
    std::vector<double> tps;
    for (const auto& [n, line] : lines_of(text)) {
        const bool metrics = contains(line, "tokens_per_second_per_gpu") || contains(line, "peak_memory_alloc") || contains(line, "peak_memory_reserved");
        if (metrics) {
            if (m.line == 0) m.line = n;
            if (auto t = number_after(line, "tokens_per_second_per_gpu:"); t && need_positive(t, file, n, "tokens_per_second_per_gpu", errs))
                tps.push_back(*t);
            if (auto a = number_after(line, "peak_memory_alloc:"); a && need_positive(a, file, n, "peak_memory_alloc", errs))
                m.peak_allocated_bytes = std::max(m.peak_allocated_bytes.value_or(0), *a * kGiB);
            if (auto r = number_after(line, "peak_memory_reserved:"); r && need_positive(r, file, n, "peak_memory_reserved", errs))
                m.peak_reserved_bytes = std::max(m.peak_reserved_bytes.value_or(0), *r * kGiB);
            continue;
        }
        // training.log_memory_stats(): "GPU peak memory allocation: 16.40 GiB" / "GPU peak memory reserved: ..."
        if (auto a = number_after(line, "GPU peak memory allocation:")) {
            if (m.line == 0) m.line = n;
            if (need_positive(a, file, n, "GPU peak memory allocation", errs)) m.peak_allocated_bytes = std::max(m.peak_allocated_bytes.value_or(0), *a * kGiB);
        } else if (auto r = number_after(line, "GPU peak memory reserved:")) {
            if (m.line == 0) m.line = n;
            if (need_positive(r, file, n, "GPU peak memory reserved", errs)) m.peak_reserved_bytes = std::max(m.peak_reserved_bytes.value_or(0), *r * kGiB);
        }
    }
    if (!tps.empty()) {
        m.tokens_per_s_per_gpu = median_warm(tps);
        m.samples = static_cast<int>(tps.size());
    }
    return finish(m, errs, file, "torchtune \"tokens_per_second_per_gpu:\" / \"peak_memory_alloc:\" metrics");
}

// "12345 MiB" -> bytes; nullopt if not a size.
std::optional<double> size_cell(std::string cell) {
    std::string num, unit;
    for (char ch : cell) {
        if (std::isdigit(static_cast<unsigned char>(ch)) || ch == '.') num += ch;
        else if (std::isalpha(static_cast<unsigned char>(ch))) unit += ch;
    }
    double v = 0;
    auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
    if (num.empty() || ec != std::errc() || end != num.data() + num.size() || !std::isfinite(v)) return std::nullopt;
    static const std::map<std::string, double> mult{{"B", 1}, {"KiB", 1024.0}, {"MiB", kMiB}, {"GiB", kGiB}, {"TiB", kGiB * 1024}, {"PiB", kGiB * 1024 * 1024}};
    auto it = mult.find(unit);
    if (it == mult.end()) return std::nullopt;
    return v * it->second;
}

Result<Measured> parse_memory_summary(const std::string& file, std::string_view text) {
    Measured m;
    m.format = "memory-summary";
    std::vector<Diagnostic> errs;
    for (const auto& [n, line] : lines_of(text)) {
        const bool alloc = contains(line, "| Allocated memory");
        const bool res = contains(line, "| GPU reserved memory");
        if (!alloc && !res) continue;
        if (m.line == 0) m.line = n;
        // | name | Cur Usage | Peak Usage | Tot Alloc | Tot Freed |
        std::vector<std::string> cells;
        size_t p = 0;
        while ((p = line.find('|', p)) != std::string::npos) {
            const size_t q = line.find('|', p + 1);
            if (q == std::string::npos) break;
            cells.push_back(line.substr(p + 1, q - p - 1));
            p = q;
        }
        const char* key = alloc ? "Allocated memory" : "GPU reserved memory";
        std::optional<double> peak = cells.size() >= 3 ? size_cell(cells[2]) : std::nullopt;
        if (!peak) {
            errs.push_back(diag(file, n, key, std::string("\"") + key + "\" row has no Peak Usage size (third column, e.g. \"20480 MiB\")"));
            continue;
        }
        (alloc ? m.peak_allocated_bytes : m.peak_reserved_bytes) = *peak;
    }
    return finish(m, errs, file, "torch.cuda.memory_summary() \"Allocated memory\" / \"GPU reserved memory\" rows");
}

// Byte offset -> 1-based line.
int line_at(std::string_view text, size_t offset) {
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(std::min(offset, text.size())), '\n'));
}

Result<Measured> parse_hf(const std::string& file, std::string_view text) {
    Measured m;
    m.format = "hf-trainer";
    std::vector<Diagnostic> errs;
    const size_t first = text.find_first_not_of(" \t\r\n");
    auto from_entry = [&](const nlohmann::json& e, int line) {
        auto num = [&](const char* k) -> std::optional<double> {
            if (!e.contains(k)) return std::nullopt;
            if (!e[k].is_number()) return std::numeric_limits<double>::quiet_NaN();
            return e[k].get<double>();
        };
        const auto steps = num("train_steps_per_second");
        const auto samples = num("train_samples_per_second");
        if (need_positive(steps, file, line, "train_steps_per_second", errs)) m.step_s = 1.0 / *steps;
        if (need_positive(samples, file, line, "train_samples_per_second", errs)) m.samples_per_s = *samples;
        m.line = line;
    };
    if (first != std::string_view::npos && text[first] == '{' && text.find("log_history") != std::string_view::npos) {
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(text);
        } catch (const nlohmann::json::parse_error& e) {
            return diag(file, line_at(text, e.byte > 0 ? e.byte - 1 : 0), "", std::string("invalid JSON: ") + e.what());
        }
        if (!j.is_object() || !j.contains("log_history") || !j["log_history"].is_array())
            return diag(file, 1, "log_history", "trainer_state.json must have a \"log_history\" array");
        const auto& h = j["log_history"];
        for (auto it = h.rbegin(); it != h.rend(); ++it)
            if (it->is_object() && it->contains("train_runtime")) {
                // Line of the entry: where its "train_runtime" key is written.
                const size_t at = text.rfind("\"train_runtime\"");
                from_entry(*it, at == std::string_view::npos ? 1 : line_at(text, at));
                return finish(m, errs, file, "Trainer summary");
            }
        return diag(file, 1, "train_runtime",
                    "log_history has no final entry with \"train_runtime\" (the run did not finish, or this is a checkpoint's trainer_state.json)");
    }
    // The dict Trainer.train() prints: {'train_runtime': 1234.5, 'train_samples_per_second': 12.3, ...}
    for (const auto& [n, line] : lines_of(text)) {
        if (!contains(line, "'train_runtime'")) continue;
        const size_t brace = line.find('{');
        std::string js = brace == std::string::npos ? std::string() : line.substr(brace);
        js = js.substr(0, js.rfind('}') + 1);
        std::replace(js.begin(), js.end(), '\'', '"');
        nlohmann::json e = nlohmann::json::parse(js, nullptr, false);
        if (e.is_discarded() || !e.is_object()) {
            errs.push_back(diag(file, n, "train_runtime", "Trainer summary line is not a complete {'train_runtime': ..., ...} dict"));
            continue;
        }
        from_entry(e, n);
    }
    return finish(m, errs, file, "Hugging Face Trainer summary (trainer_state.json log_history or {'train_runtime': ...})");
}

}  // namespace

std::optional<LogFormat> detect_log_format(std::string_view text) {
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string_view::npos && text[first] == '{' && text.find("log_history") != std::string_view::npos) return LogFormat::HfTrainer;
    for (const auto& [n, line] : lines_of(text)) {
        if ((contains(line, " iteration ") && contains(line, "consumed samples")) || contains(line, "memory (MB)") ||
            contains(line, "train_step_timing in s="))
            return LogFormat::Megatron;
        if (contains(line, "'train_runtime'")) return LogFormat::HfTrainer;
        if (contains(line, "tokens_per_second_per_gpu") || contains(line, "peak_memory_alloc") || contains(line, "GPU peak memory allocation"))
            return LogFormat::Torchtune;
        if (contains(line, "step:") && contains(line, "loss:") && contains(line, "tps:")) return LogFormat::Torchtitan;
        if (contains(line, "PyTorch CUDA memory summary") || contains(line, "| Allocated memory")) return LogFormat::MemorySummary;
    }
    return std::nullopt;
}

Result<Measured> parse_run_log(std::string_view text, const std::string& file, LogFormat f) {
    if (f == LogFormat::Auto) {
        auto d = detect_log_format(text);
        if (!d)
            return diag(file, 1, "",
                        "not a recognised training log (Megatron-LM/NeMo iteration lines, Hugging Face trainer_state.json, "
                        "torchtitan or torchtune metrics, torch.cuda.memory_summary())");
        f = *d;
    }
    switch (f) {
        case LogFormat::Megatron: return parse_megatron(file, text);
        case LogFormat::HfTrainer: return parse_hf(file, text);
        case LogFormat::Torchtitan: return parse_torchtitan(file, text);
        case LogFormat::Torchtune: return parse_torchtune(file, text);
        case LogFormat::MemorySummary: return parse_memory_summary(file, text);
        case LogFormat::Auto: break;
    }
    return diag(file, 1, "", "unknown log format");
}

Result<RunFile> parse_run_file(std::string_view text, const std::string& file) {
    toml::table doc;
    if (auto err = detail::parse_document(text, file, doc)) return *err;
    const char* sec = doc.contains("measured") ? "measured" : doc.contains("run") ? "run" : nullptr;
    if (!sec) return diag(file, 1, "measured", "a run file needs a [measured] table (step_time_s, tokens_per_s, peak_allocated_gib, ... or log)");
    const toml::table* t = doc[sec].as_table();
    if (!t) return diag(file, 1, sec, std::string("[") + sec + "] must be a table");
    auto scenario = parse_scenario_toml(text, file, {sec});
    if (!scenario) return scenario.error();
    RunFile rf;
    rf.scenario = *scenario;
    rf.measured.format = "run-file";
    rf.measured.file = file;
    rf.measured.line = static_cast<int>(t->source().begin.line);
    std::vector<Diagnostic> errs;
    struct Key { const char* name; std::optional<double> Measured::*field; double scale; };
    const Key keys[] = {{"step_time_s", &Measured::step_s, 1},
                        {"tokens_per_s", &Measured::tokens_per_s, 1},
                        {"tokens_per_s_per_gpu", &Measured::tokens_per_s_per_gpu, 1},
                        {"samples_per_s", &Measured::samples_per_s, 1},
                        {"peak_allocated_gib", &Measured::peak_allocated_bytes, kGiB},
                        {"peak_reserved_gib", &Measured::peak_reserved_bytes, kGiB},
                        {"device_memory_gib", &Measured::device_bytes, kGiB}};
    for (const auto& [k, node] : *t) {
        const std::string key(k.str());
        const int line = static_cast<int>(node.source().begin.line), col = static_cast<int>(node.source().begin.column);
        if (key == "name" || key == "log" || key == "log_format") {
            auto s = node.value_exact<std::string>();
            if (!s || s->empty()) { errs.push_back({file, line, col, key, key + " must be a non-empty string"}); continue; }
            if (key == "name") rf.name = *s;
            else if (key == "log") { rf.log = *s; rf.log_line = line; }
            else if (!parse_log_format(*s)) errs.push_back({file, line, col, key, "log_format = \"" + *s + "\" is not one of: auto, megatron, nemo, hf-trainer, torchtitan, torchtune, memory-summary"});
            else rf.log_format = *s;
            continue;
        }
        const Key* found = nullptr;
        for (const Key& kk : keys) if (key == kk.name) found = &kk;
        if (!found) {
            errs.push_back({file, line, col, key, "unknown key \"" + key + "\" in [" + sec + "] (known: step_time_s, tokens_per_s, tokens_per_s_per_gpu, samples_per_s, peak_allocated_gib, peak_reserved_gib, device_memory_gib, name, log, log_format)"});
            continue;
        }
        std::optional<double> v;
        if (auto d = node.value_exact<double>()) v = *d;
        else if (auto i = node.value_exact<std::int64_t>()) v = static_cast<double>(*i);
        if (!v || !std::isfinite(*v) || *v <= 0) { errs.push_back({file, line, col, key, key + " must be a positive number"}); continue; }
        rf.measured.*(found->field) = *v * found->scale;
    }
    if (errs.empty() && rf.measured.empty() && rf.log.empty())
        errs.push_back(diag(file, rf.measured.line, sec, std::string("[") + sec + "] has no measured figure and names no log"));
    if (!errs.empty()) return Error(errs);
    return rf;
}

}  // namespace trainplan
