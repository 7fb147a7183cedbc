#include "trainplan/app/report.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trainplan/app/format.hpp"
#include "trainplan/app/presets.hpp"
#include "trainplan/units.hpp"

namespace trainplan::app {

namespace {

std::string days(double s) { return fmt::format("{:.1f}", s / 86400.0); }
std::string usd(double v) {
    if (v <= 0) return "-";
    if (v >= 1e6) return fmt::format("${:.2f} M", v / 1e6);
    if (v >= 1e4) return fmt::format("${:.0f} k", v / 1e3);
    return fmt::format("${:.0f}", v);
}
std::string layout(const SizingOption& o) {
    const ParallelLayout& l = o.best.scenario.setup.layout;
    const TrainingSetup& t = o.best.scenario.setup;
    return fmt::format("tp{} pp{} dp{}{}{}, mb {} x {}, ZeRO-{}, {}{}", l.tp, l.pp, l.dp, l.vp > 1 ? fmt::format(" v{}", l.vp) : "",
                       l.sequence_parallel ? " sp" : "", t.micro_batch, t.grad_accum, t.zero_stage,
                       t.recompute == Recompute::None ? "no recompute" : std::string(to_string(t.recompute)) + " recompute",
                       t.optimizer_offload != Offload::None ? ", optimizer offload" : "");
}
std::string esc(const std::string& s) {
    std::string o;
    for (char c : s) {
        switch (c) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            default: o += c;
        }
    }
    return o;
}
std::string setup_line(const SizingReport& r, std::int64_t global_batch) {
    const TrainingSetup& t = r.base.setup;
    std::string m = t.method == Method::Full ? "full training" : t.method == Method::LoRA ? "LoRA" : "QLoRA";
    return fmt::format("{}, {}, {}, sequence {} tokens, global batch {} sequences ({:.2f} M tokens per step)", m, to_string(t.precision),
                       to_string(t.optimizer), t.seq_len, global_batch, static_cast<double>(global_batch * t.seq_len) / 1e6);
}
std::int64_t report_global_batch(const SizingReport& r) {
    for (const auto& o : r.options)
        if (o.meets) return o.best.scenario.setup.global_batch();
    return r.base.setup.global_batch();
}
std::string goal_line(const SizingReport& r) {
    std::string g = fmt::format("{:.3g} tokens of {}", r.goal.tokens, r.base.model.name);
    if (r.goal.deadline_s > 0) g += fmt::format(" within {} days", days(r.goal.deadline_s));
    if (r.goal.budget_usd > 0) g += fmt::format(", budget {}", usd(r.goal.budget_usd));
    return g;
}
double option_cost(const SizingReport& r, const SizingOption& o) {
    return r.cost_basis == "rent" ? o.rent_cost_usd : o.purchase_usd + o.energy_cost_usd;
}

}  // namespace

std::string report_markdown(const SizingReport& r) {
    std::string m = "# Training hardware sizing\n\n";
    m += fmt::format("**Goal:** {}.  \n**Setup:** {}.\n\n", goal_line(r), setup_line(r, report_global_batch(r)));
    m += "## Recommendation\n\n" + r.recommendation + "\n\n## Candidates\n\n";
    m += "| GPU | meets goal | GPUs (nodes) | layout | time (days) | GPU-hours | energy (kWh) | rent | purchase | MFU | memory headroom | bound |\n";
    m += "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& o : r.options) {
        if (!o.meets) {
            m += fmt::format("| {} | no: {} | | | | | | | | | | |\n", o.gpu_name, o.why_not);
            continue;
        }
        m += fmt::format("| {} | yes | {} ({}) | {} | {} | {:.0f} | {:.0f} | {} | {} | {:.0f} % | {} | {} |\n", o.gpu_name, o.gpus, o.nodes,
                         layout(o), days(o.train_time_s), o.gpu_hours, o.energy_kwh, usd(o.rent_cost_usd), usd(o.purchase_usd),
                         100 * o.best.time.throughput.mfu, gb(o.headroom_bytes), o.bound);
    }
    m += "\n## Where the step time goes (best layout per candidate)\n\n| GPU | step (s) | compute | communication | bubble | optimizer | offload | data |\n|---|---|---|---|---|---|---|---|\n";
    for (const auto& o : r.options) {
        if (!o.meets) continue;
        const TimeBreakdown& t = o.best.time.time;
        auto pct = [&](double v) { return fmt::format("{:.0f} %", 100 * v / t.step_s); };
        m += fmt::format("| {} | {:.3f} | {} | {} | {} | {} | {} | {} |\n", o.gpu_name, t.step_s, pct(t.compute_s), pct(t.communication_s),
                         pct(t.bubble_s), pct(t.optimizer_s), pct(t.offload_s), pct(t.data_s));
    }
    m += fmt::format("\nCosts: rent = $/GPU-hour x GPU-hours where a rent was given; purchase = price per GPU x GPUs; energy at "
                     "${:g}/kWh, PUE {:g}. Predictions from trainplan's analytic model (see `trainplan validate` for its accuracy).\n",
                     r.base.run.electricity_usd_per_kwh, r.base.run.pue);
    return m;
}

std::string report_html(const SizingReport& r) {
    std::vector<const SizingOption*> ok;
    for (const auto& o : r.options)
        if (o.meets) ok.push_back(&o);
    // Horizontal bar chart as inline SVG.
    // value() < 0: not known (drawn as a note, not a bar); label() formats a value.
    auto bars = [&](const std::string& title, auto value, auto label, double marker, const std::string& marker_label) {
        const int row = 28, left = 190, width = 400, top = 30;
        double vmax = marker;
        for (const auto* o : ok) vmax = std::max(vmax, value(*o));
        if (vmax <= 0) vmax = 1;
        std::string svg = fmt::format("<figure><figcaption>{}</figcaption><svg role=\"img\" aria-label=\"{}\" width=\"720\" height=\"{}\" "
                                      "viewBox=\"0 0 720 {}\" xmlns=\"http://www.w3.org/2000/svg\">",
                                      esc(title), esc(title), top + row * static_cast<int>(ok.size()) + 20, top + row * static_cast<int>(ok.size()) + 20);
        int i = 0;
        for (const auto* o : ok) {
            const double v = value(*o);
            const int y = top + row * i++;
            svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"lbl\">{}</text>", left - 8, y + 17, esc(o->gpu_name));
            if (v < 0) {
                svg += fmt::format("<text x=\"{}\" y=\"{}\" class=\"val\">no price given</text>", left + 6, y + 17);
                continue;
            }
            const double w = width * v / vmax;
            svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"20\" class=\"bar\"/>", left, y + 3, std::max(1.0, w));
            svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"val\">{}</text>", left + w + 6, y + 17, esc(label(v)));
        }
        if (marker > 0) {
            const double x = left + width * marker / vmax;
            svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" class=\"mark\"/><text x=\"{:.1f}\" y=\"{}\" class=\"val\">{}</text>",
                               x, top - 6, x, top + row * static_cast<int>(ok.size()), x + 4, top - 10, esc(marker_label));
        }
        return svg + "</svg></figure>";
    };
    auto stacked = [&]() {
        const int row = 28, left = 190, width = 400, top = 40;
        const char* names[] = {"compute", "communication", "bubble", "optimizer", "offload", "data"};
        std::string svg = fmt::format("<figure><figcaption>Where the step time goes</figcaption><svg role=\"img\" aria-label=\"step-time breakdown\" "
                                      "width=\"720\" height=\"{}\" viewBox=\"0 0 720 {}\" xmlns=\"http://www.w3.org/2000/svg\">",
                                      top + row * static_cast<int>(ok.size()) + 10, top + row * static_cast<int>(ok.size()) + 10);
        for (int k = 0; k < 6; ++k)
            svg += fmt::format("<rect x=\"{}\" y=\"6\" width=\"12\" height=\"12\" class=\"s{}\"/><text x=\"{}\" y=\"17\" class=\"val\">{}</text>",
                               left - 180 + k * 130, k, left - 180 + k * 130 + 16, names[k]);
        int i = 0;
        for (const auto* o : ok) {
            const TimeBreakdown& t = o->best.time.time;
            const double parts[] = {t.compute_s, t.communication_s, t.bubble_s, t.optimizer_s, t.offload_s, t.data_s};
            const int y = top + row * i++;
            svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"lbl\">{}</text>", left - 8, y + 17, esc(o->gpu_name));
            double x = left;
            for (int k = 0; k < 6; ++k) {
                const double w = width * parts[k] / t.step_s;
                if (w <= 0) continue;
                svg += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"20\" class=\"s{}\"><title>{} {:.0f} %</title></rect>", x,
                                   y + 3, w, k, names[k], 100 * parts[k] / t.step_s);
                x += w;
            }
        }
        return svg + "</svg></figure>";
    };

    std::string h = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Training hardware sizing</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
:root { color-scheme: light dark; --fg:#1b1f24; --bg:#fff; --muted:#57606a; --bar:#2f6fde; --line:#d0d7de; }
@media (prefers-color-scheme: dark) { :root { --fg:#e6edf3; --bg:#0d1117; --muted:#8b949e; --bar:#58a6ff; --line:#30363d; } }
body { font: 15px/1.5 system-ui, sans-serif; color: var(--fg); background: var(--bg); max-width: 1100px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.6em; } .rec { border-left: 4px solid var(--bar); padding: .5em 1em; background: color-mix(in srgb, var(--bar) 8%, transparent); }
table { border-collapse: collapse; width: 100%; margin: 1em 0; font-size: 14px; } th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; } .no { color: var(--muted); }
figure { margin: 1.5em 0; } figcaption { font-weight: 600; margin-bottom: .3em; }
svg .lbl, svg .val { font: 13px system-ui, sans-serif; fill: var(--fg); } svg .bar { fill: var(--bar); } svg .mark { stroke: #d1242f; stroke-width: 2; stroke-dasharray: 4 3; }
svg .s0 { fill: #2f6fde; } svg .s1 { fill: #e16f24; } svg .s2 { fill: #8250df; } svg .s3 { fill: #1a7f37; } svg .s4 { fill: #bf3989; } svg .s5 { fill: #9a6700; }
footer { color: var(--muted); font-size: 13px; margin-top: 2em; }
</style></head><body>
)";
    h += "<h1>Training hardware sizing</h1>\n";
    h += fmt::format("<p><b>Goal:</b> {}.<br><b>Setup:</b> {}.</p>\n", esc(goal_line(r)), esc(setup_line(r, report_global_batch(r))));
    h += fmt::format("<h2>Recommendation</h2><p class=\"rec\">{}</p>\n", esc(r.recommendation));
    h += "<h2>Candidates</h2><table><thead><tr><th>GPU</th><th>GPUs (nodes)</th><th>layout</th><th>time (days)</th><th>GPU-hours</th>"
         "<th>energy (kWh)</th><th>rent</th><th>purchase</th><th>MFU</th><th>headroom</th><th>bound</th></tr></thead><tbody>\n";
    for (const auto& o : r.options) {
        if (!o.meets) {
            h += fmt::format("<tr class=\"no\"><td>{}</td><td colspan=\"10\">does not meet the goal: {}</td></tr>\n", esc(o.gpu_name), esc(o.why_not));
            continue;
        }
        h += fmt::format("<tr><td>{}</td><td class=\"n\">{} ({})</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.0f}</td>"
                         "<td class=\"n\">{:.0f}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.0f} %</td>"
                         "<td class=\"n\">{}</td><td>{}</td></tr>\n",
                         esc(o.gpu_name), o.gpus, o.nodes, esc(layout(o)), days(o.train_time_s), o.gpu_hours, o.energy_kwh,
                         usd(o.rent_cost_usd), usd(o.purchase_usd), 100 * o.best.time.throughput.mfu, gb(o.headroom_bytes), o.bound);
    }
    h += "</tbody></table>\n";
    if (!ok.empty()) {
        h += bars("Time to train (days)", [](const SizingOption& o) { return o.train_time_s / 86400.0; },
                  [](double v) { return fmt::format("{:.1f} days", v); }, r.goal.deadline_s / 86400.0, "deadline");
        h += bars(r.cost_basis == "rent" ? "Cost to rent (USD)" : "Purchase + energy (USD)",
                  [&](const SizingOption& o) {
                      const bool known = r.cost_basis == "rent" ? o.rent_cost_usd > 0 : o.purchase_usd > 0;
                      return known ? option_cost(r, o) : -1.0;
                  },
                  [](double v) { return usd(v); }, r.goal.budget_usd, "budget");
        h += stacked();
    }
    h += fmt::format("<footer>Generated by trainplan. Energy at ${:g}/kWh, PUE {:g}; purchase prices from the GPU presets unless given. "
                     "Predictions come from an analytic model; <code>trainplan validate</code> shows its accuracy against published runs.</footer>\n",
                     r.base.run.electricity_usd_per_kwh, r.base.run.pue);
    h += "</body></html>\n";
    return h;
}

std::string report_json(const SizingReport& r) {
    nlohmann::json opts = nlohmann::json::array();
    for (const auto& o : r.options) {
        nlohmann::json j{{"gpu", o.gpu_id}, {"name", o.gpu_name}, {"meets", o.meets}, {"why_not", o.why_not}};
        if (o.meets) {
            const ParallelLayout& l = o.best.scenario.setup.layout;
            j.update({{"gpus", o.gpus}, {"nodes", o.nodes},
                      {"layout", {{"tp", l.tp}, {"pp", l.pp}, {"dp", l.dp}, {"vp", l.vp}, {"ep", l.ep}, {"sequence_parallel", l.sequence_parallel},
                                  {"schedule", to_string(l.schedule)}, {"micro_batch", o.best.scenario.setup.micro_batch},
                                  {"grad_accum", o.best.scenario.setup.grad_accum}, {"zero", o.best.scenario.setup.zero_stage},
                                  {"recompute", to_string(o.best.scenario.setup.recompute)},
                                  {"optimizer_offload", to_string(o.best.scenario.setup.optimizer_offload)},
                                  {"param_offload", to_string(o.best.scenario.setup.param_offload)},
                                  {"fsdp", to_string(o.best.scenario.setup.fsdp)},
                                  {"tp_comm_overlap", o.best.scenario.setup.tp_comm_overlap}}},
                      {"tokens_per_s", o.best.time.throughput.tokens_per_s}, {"step_s", o.best.time.time.step_s},
                      {"mfu", o.best.time.throughput.mfu}, {"train_time_s", o.train_time_s}, {"gpu_hours", o.gpu_hours},
                      {"energy_kwh", o.energy_kwh}, {"energy_cost_usd", o.energy_cost_usd}, {"rent_cost_usd", o.rent_cost_usd},
                      {"purchase_usd", o.purchase_usd}, {"amortized_usd", o.amortized_usd}, {"headroom_bytes", o.headroom_bytes},
                      {"memory_total_bytes", o.best.memory.total}, {"bound", o.bound}});
        }
        opts.push_back(j);
    }
    nlohmann::json j{{"goal", {{"tokens", r.goal.tokens}, {"deadline_s", r.goal.deadline_s}, {"budget_usd", r.goal.budget_usd}}},
                     {"model", r.base.model.id}, {"cost_basis", r.cost_basis}, {"candidates", opts},
                     {"recommended", r.recommended >= 0 ? nlohmann::json(r.options[static_cast<size_t>(r.recommended)].gpu_id) : nlohmann::json()},
                     {"recommendation", r.recommendation}};
    return j.dump(2) + "\n";
}

std::string report_csv(const SizingReport& r) {
    std::string c = "gpu,meets,gpus,nodes,tp,pp,dp,micro_batch,grad_accum,zero,recompute,tokens_per_s,mfu,train_time_s,gpu_hours,"
                    "energy_kwh,energy_cost_usd,rent_cost_usd,purchase_usd,headroom_bytes,bound,recommended\n";
    for (size_t i = 0; i < r.options.size(); ++i) {
        const auto& o = r.options[i];
        if (!o.meets) {
            c += fmt::format("{},false,,,,,,,,,,,,,,,,,,,,{}\n", o.gpu_id, "false");
            continue;
        }
        const TrainingSetup& t = o.best.scenario.setup;
        c += fmt::format("{},true,{},{},{},{},{},{},{},{},{},{:.6g},{:.4f},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{}\n", o.gpu_id,
                         o.gpus, o.nodes, t.layout.tp, t.layout.pp, t.layout.dp, t.micro_batch, t.grad_accum, t.zero_stage,
                         to_string(t.recompute), o.best.time.throughput.tokens_per_s, o.best.time.throughput.mfu, o.train_time_s,
                         o.gpu_hours, o.energy_kwh, o.energy_cost_usd, o.rent_cost_usd, o.purchase_usd, o.headroom_bytes, o.bound,
                         static_cast<int>(i) == r.recommended ? "true" : "false");
    }
    return c;
}

namespace {

namespace fs = std::filesystem;

// What may be replaced: nothing yet (the new file gets 0666 less the umask) or a
// regular file (its permission bits are kept). Anything else is refused, so a
// device, FIFO, directory or symbolic link is never written through or replaced.
bool check_target(const std::string& path, mode_t& mode, std::string& why) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
        if (errno != ENOENT) {
            why = path + ": " + std::strerror(errno);
            return false;
        }
        const mode_t mask = ::umask(0);
        ::umask(mask);
        mode = 0666 & ~mask;
        return true;
    }
    if (!S_ISREG(st.st_mode)) {
        why = path + ": is " + file_type_name(st.st_mode) + "; refusing to replace anything but a regular file (-o - writes to standard output)";
        return false;
    }
    mode = st.st_mode & 07777;
    return true;
}

// A new file in `dir` with an unpredictable name, created O_CREAT | O_EXCL |
// O_NOFOLLOW (mkstemp's guarantees: never an existing file, never through a
// planted symbolic link), mode 0600 until it is complete.
int create_temporary(const fs::path& dir, const std::string& stem, std::string& tmp, std::string& why) {
    static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
        std::string suffix;
        for (int i = 0; i < 12; ++i) suffix += kChars[rd() % (sizeof kChars - 1)];
        tmp = (dir / ("." + stem + ".tmp-" + suffix)).string();
        const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) return fd;
        if (errno != EEXIST) {
            why = std::strerror(errno);
            return -1;
        }
    }
    why = "no unused temporary name";
    return -1;
}

bool write_all(int fd, std::string_view data) {
    while (!data.empty()) {
        const ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
}

// Percent-encodes a path for a file:// URL.
std::string file_url(const std::string& path) {
    std::string u = "file://";
    for (unsigned char c : path) {
        if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') u += static_cast<char>(c);
        else u += fmt::format("%{:02X}", c);
    }
    return u;
}

// The browser that prints PDFs: $TRAINPLAN_CHROMIUM if set, else the first
// chromium, chromium-browser or google-chrome on PATH. Empty when none.
std::string find_browser() {
    auto executable = [](const std::string& p) {
        struct stat st {};
        return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
    };
    if (const char* b = std::getenv("TRAINPLAN_CHROMIUM"); b && *b) {
        const std::string named(b);
        if (named.find('/') != std::string::npos) return executable(named) ? named : std::string();
    }
    std::vector<std::string> names = {"chromium", "chromium-browser", "google-chrome"};
    if (const char* b = std::getenv("TRAINPLAN_CHROMIUM"); b && *b) names = {b};
    const char* path_env = std::getenv("PATH");
    const std::string path_list = path_env && *path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
    for (const auto& name : names) {
        size_t start = 0;
        while (start <= path_list.size()) {
            const size_t end = std::min(path_list.find(':', start), path_list.size());
            const std::string dir = path_list.substr(start, end - start);
            start = end + 1;
            if (dir.empty() || dir[0] != '/') continue;  // never the current directory
            const std::string candidate = dir + "/" + name;
            if (executable(candidate)) return candidate;
        }
    }
    return {};
}

// Runs argv[0] with exactly these arguments and environment (no shell), its
// input and output on /dev/null; exit status, or -1 after `timeout_s`.
int run_program(const std::vector<std::string>& args, const std::vector<std::string>& env, int timeout_s, std::string& why) {
    std::vector<char*> argv, envp;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        why = std::string("cannot start ") + args[0] + ": " + std::strerror(rc);
        return -1;
    }
    int status = 0;
    for (int waited_ms = 0;; waited_ms += 20) {
        const pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) {
            why = std::string("waiting for ") + args[0] + ": " + std::strerror(errno);
            return -1;
        }
        if (waited_ms >= timeout_s * 1000) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            why = args[0] + " did not finish within " + std::to_string(timeout_s) + " s";
            return -1;
        }
        ::usleep(20000);
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    why = args[0] + " was killed by signal " + std::to_string(WTERMSIG(status));
    return -1;
}

}  // namespace

bool write_file_atomically(const std::string& path, const std::string& text, std::string& why) {
    if (path.empty() || path == "-") {
        why = (path.empty() ? std::string("(empty name)") : path) + ": not a file name (- means standard output, which the caller writes)";
        return false;
    }
    const fs::path target(path);
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
        why = path + ": directory " + dir.string() + " does not exist";
        return false;
    }
    mode_t mode = 0644;
    if (!check_target(path, mode, why)) return false;
    std::string tmp;
    const int fd = create_temporary(dir, target.filename().string(), tmp, why);
    if (fd < 0) {
        why = path + ": cannot write in " + dir.string() + ": " + why;
        return false;
    }
    bool ok = write_all(fd, text);
    if (!ok) why = path + ": write failed: " + std::strerror(errno);
    if (ok && ::fchmod(fd, mode) != 0) {
        why = path + ": cannot set permissions: " + std::strerror(errno);
        ok = false;
    }
    if (ok && ::fsync(fd) != 0) {
        why = path + ": write failed: " + std::strerror(errno);
        ok = false;
    }
    if (::close(fd) != 0 && ok) {
        why = path + ": write failed: " + std::strerror(errno);
        ok = false;
    }
    if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
        why = path + ": cannot replace the file: " + std::strerror(errno);
        ok = false;
    }
    if (!ok) ::unlink(tmp.c_str());
    return ok;
}

bool write_pdf_atomically(const std::string& path, const std::string& html, std::string& why) {
    mode_t mode = 0644;
    if (path.empty() || path == "-") {
        why = "PDF output needs a file name (-o FILE.pdf)";
        return false;
    }
    if (!check_target(path, mode, why)) return false;
    const std::string browser = find_browser();
    if (browser.empty()) {
        why = path + ": PDF output needs a headless Chromium on PATH (Debian: apt install chromium; or set TRAINPLAN_CHROMIUM); "
                     "write .html and print it, or use the GUI";
        return false;
    }
    // A private working directory (mkdtemp: 0700, unpredictable name) for the
    // HTML, the browser profile and the PDF it prints.
    std::error_code ec;
    std::string work = (fs::temp_directory_path(ec) / "trainplan-pdf-XXXXXX").string();
    if (ec || ::mkdtemp(work.data()) == nullptr) {
        why = path + ": cannot create a temporary directory: " + std::strerror(errno);
        return false;
    }
    const std::string html_file = work + "/report.html", pdf_file = work + "/report.pdf";
    bool ok = write_file_atomically(html_file, html, why);
    if (ok) {
        const std::vector<std::string> args = {browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                                               "--user-data-dir=" + work + "/profile", "--no-pdf-header-footer",
                                               "--print-to-pdf=" + pdf_file, file_url(html_file)};
        // A fixed environment: nothing of the caller's (LD_PRELOAD, proxies, ...) reaches the browser.
        const std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + work, "TMPDIR=" + work, "LANG=C.UTF-8"};
        std::string run_why;
        const int rc = run_program(args, env, 120, run_why);
        std::string pdf;
        if (rc == 0) {
            std::ifstream in(pdf_file, std::ios::binary);
            std::ostringstream ss;
            ss << in.rdbuf();
            pdf = ss.str();
        }
        if (rc != 0 || pdf.rfind("%PDF-", 0) != 0) {
            why = path + ": " + browser + " could not print the report to PDF" +
                  (!run_why.empty() ? " (" + run_why + ")" : rc > 0 ? " (exit status " + std::to_string(rc) + ")" : "");
            ok = false;
        } else {
            ok = write_file_atomically(path, pdf, why);
        }
    }
    fs::remove_all(work, ec);
    return ok;
}

}  // namespace trainplan::app
