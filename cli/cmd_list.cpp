#include <algorithm>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "trainplan/app/format.hpp"
#include "trainplan/units.hpp"

namespace trainplan::cli {

void setup_list(CLI::App& app, ListOptions& o) {
    app.add_option("--presets", o.preset_dirs, "Extra preset directory; repeatable");
    app.add_flag("--json", o.json, "Machine-readable output");
}

namespace {

// Parses every preset of a kind; any broken preset is a bad-input error.
template <class T, class P>
Result<std::vector<T>> parse_all(FilePresets& presets, PresetKind kind, P parse) {
    std::vector<T> out;
    std::vector<Diagnostic> errs;
    for (const TextSource& src : presets.all(kind)) {
        auto r = parse(src.text, src.filename, src.id);
        if (r) out.push_back(*r);
        else errs.insert(errs.end(), r.error().diagnostics.begin(), r.error().diagnostics.end());
    }
    if (!errs.empty()) return Error(errs);
    return out;
}

// The shipped preset a user preset of this name hides, or null.
nlohmann::json shadows_json(FilePresets& presets, PresetKind kind, const std::string& id) {
    const std::string hidden = presets.shadowed(kind, id);
    return hidden.empty() ? nlohmann::json() : nlohmann::json(hidden);
}

}  // namespace

int run_models(const ListOptions& o, std::ostream& out, std::ostream& err) {
    FilePresets presets = command_presets(o.preset_dirs, err);
    auto models = parse_all<ModelSpec>(presets, PresetKind::Model, parse_model_toml);
    if (!models) return report_error(models.error(), err);
    if (o.json) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& m : *models) {
            const ParamCounts pc = count_params(m);
            j.push_back({{"id", m.id}, {"name", m.name}, {"params", pc.total}, {"active_params", pc.active},
                         {"layers", m.num_layers}, {"hidden", m.hidden}, {"heads", m.num_heads},
                         {"kv_heads", m.num_kv_heads}, {"ffn", m.ffn}, {"vocab", m.vocab},
                         {"max_seq_len", m.max_seq_len}, {"experts", m.moe.num_experts}, {"source", m.source},
                         {"shadows", shadows_json(presets, PresetKind::Model, m.id)}});
        }
        out << j.dump(2) << '\n';
        return 0;
    }
    out << fmt::format("{:<22} {:>10} {:>6} {:>7} {:>9} {:>7} {:>8} {:>8}  {}\n", "preset", "params", "layers", "hidden",
                       "heads/kv", "ffn", "vocab", "context", "notes");
    for (const auto& m : *models) {
        const ParamCounts pc = count_params(m);
        std::string notes = m.is_moe() ? fmt::format("MoE {}x top-{}, {} active", m.moe.num_experts, m.moe.top_k, count(pc.active)) : "";
        if (const std::string hidden = presets.shadowed(PresetKind::Model, m.id); !hidden.empty())
            notes += (notes.empty() ? "" : "; ") + std::string("user preset, shadows ") + hidden;
        out << fmt::format("{:<22} {:>10} {:>6} {:>7} {:>9} {:>7} {:>8} {:>8}  {}\n", m.id, count(pc.total), m.num_layers,
                           m.hidden, fmt::format("{}/{}", m.num_heads, m.num_kv_heads), m.is_moe() ? m.moe.expert_ffn : m.ffn,
                           m.vocab, m.max_seq_len, notes);
    }
    out << fmt::format("{} models. Also accepted: size shorthand (7b, 13b, 70b), a model TOML file, a config.json.\n",
                       models->size());
    return 0;
}

int run_gpus(const ListOptions& o, std::ostream& out, std::ostream& err) {
    FilePresets presets = command_presets(o.preset_dirs, err);
    auto gpus = parse_all<GpuSpec>(presets, PresetKind::Gpu, parse_gpu_toml);
    if (!gpus) return report_error(gpus.error(), err);
    if (o.json) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& g : *gpus)
            j.push_back({{"id", g.id}, {"name", g.name}, {"capacity_bytes", g.capacity_bytes}, {"smi_total_bytes", g.smi_total_bytes},
                         {"memory_bandwidth_bytes_per_s", g.memory_bandwidth_Bps}, {"bf16_flops", g.peak_flops(NumericFormat::BF16)},
                         {"fp8_flops", g.fp8_flops}, {"tdp_w", g.tdp_w}, {"nvlink", g.nvlink}, {"p2p", g.p2p},
                         {"price_usd", g.price_usd}, {"source", g.source}, {"shadows", shadows_json(presets, PresetKind::Gpu, g.id)}});
        out << j.dump(2) << '\n';
        return 0;
    }
    // The id column is as wide as the longest id (user presets included), 16 at least.
    std::size_t id_w = 16;
    for (const auto& g : *gpus) id_w = std::max(id_w, g.id.size());
    out << fmt::format("{:<{}} {:<40} {:>8} {:>9} {:>10} {:>9} {:>6}  {}\n", "preset", id_w, "name", "memory", "HBM TB/s",
                       "bf16 TF/s", "fp8 TF/s", "TDP W", "GPU-GPU");
    for (const auto& g : *gpus) {
        const std::string hidden = presets.shadowed(PresetKind::Gpu, g.id);
        // No bf16 tensor cores (Volta): "-", as for fp8; fp16 is the card's tensor rate.
        out << fmt::format("{:<{}} {:<40} {:>6.1f}Gi {:>9.2f} {:>10} {:>9} {:>6.0f}  {}{}\n", g.id, id_w, g.name,
                           g.smi_total_bytes / units::GiB, g.memory_bandwidth_Bps / units::TB,
                           g.has_bf16_tensor_cores() ? fmt::format("{:.1f}", g.peak_flops(NumericFormat::BF16) / units::TFLOPS) : "-",
                           g.fp8_flops > 0 ? fmt::format("{:.0f}", g.fp8_flops / units::TFLOPS) : "-", g.tdp_w,
                           !g.nvlink.empty() ? g.nvlink : g.p2p ? "PCIe P2P" : "PCIe via host",
                           hidden.empty() ? "" : "  (user preset, shadows " + hidden + ")");
    }
    out << fmt::format("{} GPUs. memory = nvidia-smi's total (fit uses what CUDA reports, less the driver's reserve, where the preset gives it); "
                       "bf16 = dense tensor rate with fp32 accumulate.\n", gpus->size());
    return 0;
}

int run_links(const ListOptions& o, std::ostream& out, std::ostream& err) {
    FilePresets presets = command_presets(o.preset_dirs, err);
    auto links = parse_all<LinkSpec>(presets, PresetKind::Link, parse_link_toml);
    if (!links) return report_error(links.error(), err);
    if (o.json) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& l : *links)
            j.push_back({{"id", l.id}, {"name", l.name}, {"kind", to_string(l.kind)}, {"bandwidth_bytes_per_s", l.bandwidth_Bps},
                         {"efficiency", l.efficiency}, {"latency_s", l.latency_s}, {"source", l.source}});
        out << j.dump(2) << '\n';
        return 0;
    }
    out << fmt::format("{:<24} {:<44} {:<12} {:>10} {:>6} {:>8}\n", "preset", "name", "kind", "GB/s/dir", "eff", "lat us");
    for (const auto& l : *links)
        out << fmt::format("{:<24} {:<44} {:<12} {:>10.2f} {:>6} {:>8}\n", l.id, l.name, to_string(l.kind),
                           l.bandwidth_Bps / units::GBps, l.efficiency > 0 ? fmt::format("{:.2f}", l.efficiency) : "-",
                           l.latency_s > 0 ? fmt::format("{:.1f}", l.latency_s / units::us) : "-");
    return 0;
}

int run_nodes(const ListOptions& o, std::ostream& out, std::ostream& err) {
    FilePresets presets = command_presets(o.preset_dirs, err);
    auto nodes = parse_all<NodeSpec>(presets, PresetKind::Node, parse_node_toml);
    if (!nodes) return report_error(nodes.error(), err);
    if (o.json) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& n : *nodes)
            j.push_back({{"id", n.id}, {"name", n.name}, {"gpu", n.gpu}, {"gpus_per_node", n.gpus_per_node},
                         {"intra_node", n.intra_node}, {"inter_node", n.inter_node}, {"nics_per_node", n.nics_per_node}});
        out << j.dump(2) << '\n';
        return 0;
    }
    out << fmt::format("{:<20} {:<44} {:<16} {:>5} {:<16} {:<10}\n", "preset", "name", "gpu", "gpus", "intra", "inter");
    for (const auto& n : *nodes)
        out << fmt::format("{:<20} {:<44} {:<16} {:>5} {:<16} {:<10}\n", n.id, n.name, n.gpu, n.gpus_per_node,
                           n.intra_node, n.inter_node.empty() ? "-" : n.inter_node);
    return 0;
}

}  // namespace trainplan::cli
