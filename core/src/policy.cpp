#include "trainplan/policy.hpp"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <optional>
#include <toml++/toml.h>

#include "toml_reader.hpp"
#include "trainplan/enums.hpp"
#include "trainplan/units.hpp"

namespace trainplan {

// Defined in the generated defaults_toml.cpp (core/CMakeLists.txt).
extern const char* const kEmbeddedDefaultsToml;

namespace {

class Reader {
public:
    Reader(const toml::table& root, std::string file) : root_(root), file_(std::move(file)) {}
    std::vector<Diagnostic> errs;

    double number(const toml::table& t, const std::string& section, const std::string& key) {
        const toml::node* n = t.get(key);
        if (n && (n->is_floating_point() || n->is_integer())) {
            const double v = n->is_integer() ? static_cast<double>(n->as_integer()->get()) : n->as_floating_point()->get();
            if (v > 0) return v;
            fail(n, section + "." + key, section + "." + key + " = " + std::to_string(v) + " must be > 0");
            return 0;
        }
        fail(n, section + "." + key, section + "." + key + (n ? " must be a number" : " is missing"));
        return 0;
    }
    std::string string(const toml::table& t, const std::string& section, const std::string& key) {
        const toml::node* n = t.get(key);
        if (n && n->is_string()) return n->as_string()->get();
        fail(n, section + "." + key, section + "." + key + (n ? " must be a string" : " is missing"));
        return {};
    }
    const toml::table& table(const std::string& key) {
        static const toml::table empty;
        if (const toml::table* t = root_.get_as<toml::table>(key)) return *t;
        errs.push_back({file_, 0, 0, key, "[" + key + "] is missing"});
        return empty;
    }
    double non_negative(const toml::table& t, const std::string& section, const std::string& key) {
        const toml::node* n = t.get(key);
        if (n && (n->is_floating_point() || n->is_integer())) {
            const double v = n->is_integer() ? static_cast<double>(n->as_integer()->get()) : n->as_floating_point()->get();
            if (v >= 0) return v;
            fail(n, section + "." + key, section + "." + key + " = " + std::to_string(v) + " must be >= 0");
            return 0;
        }
        fail(n, section + "." + key, section + "." + key + (n ? " must be a number" : " is missing"));
        return 0;
    }
    // A share of a rate: in (0, 1] (> 0 as number() reads it, and at most 1).
    double share(const toml::table& t, const std::string& section, const std::string& key) {
        const double v = number(t, section, key);
        if (v <= 1) return v > 0 ? v : 1;  // (0: number() has reported it)
        fail(t.get(key), section + "." + key, section + "." + key + " = " + std::to_string(v) + " must be <= 1");
        return 1;
    }
    // An optional key: absent is nullopt, present must be valid.
    std::optional<double> optional_non_negative(const toml::table& t, const std::string& section, const std::string& key) {
        if (!t.get(key)) return std::nullopt;
        return non_negative(t, section, key);
    }
    std::optional<std::string> optional_string(const toml::table& t, const std::string& section, const std::string& key) {
        if (!t.get(key)) return std::nullopt;
        return string(t, section, key);
    }
    bool boolean(const toml::table& t, const std::string& section, const std::string& key) {
        const toml::node* n = t.get(key);
        if (n && n->is_boolean()) return n->as_boolean()->get();
        fail(n, section + "." + key, section + "." + key + (n ? " must be true or false" : " is missing"));
        return false;
    }
    // A list of distinct ZeRO stages (integers 0-3), at least one.
    std::vector<int> zero_stages(const toml::table& t, const std::string& section, const std::string& key) {
        const toml::node* n = t.get(key);
        const std::string name = section + "." + key;
        std::vector<int> out;
        const toml::array* a = n ? n->as_array() : nullptr;
        if (a && !a->empty()) {
            for (const toml::node& v : *a) {
                const auto* i = v.as_integer();
                if (!i || i->get() < 0 || i->get() > 3 || std::find(out.begin(), out.end(), static_cast<int>(i->get())) != out.end()) {
                    fail(&v, name, name + " must list distinct ZeRO stages, integers 0 to 3");
                    return {0};
                }
                out.push_back(static_cast<int>(i->get()));
            }
            std::sort(out.begin(), out.end());
            return out;
        }
        fail(n, name, name + (n ? " must be a non-empty list of ZeRO stages (integers 0 to 3)" : " is missing"));
        return {0};
    }
    // A string naming one entry of E's enum table.
    template <typename E>
    E choice(const toml::table& t, const std::string& section, const std::string& key) {
        const toml::node* n = t.get(key);
        const EnumTable& names = enum_table<E>();
        const std::string name = section + "." + key;
        if (n && n->is_string()) {
            const std::string value = n->as_string()->get();
            if (auto v = names.parse(value)) return static_cast<E>(*v);
            fail(n, name, name + " = \"" + value + "\" is not one of: " + names.allowed());
        } else {
            fail(n, name, name + (n ? " must be a string, one of: " + names.allowed() : " is missing"));
        }
        return E{};
    }
    const toml::table& sub(const toml::table& t, const std::string& section, const std::string& key) {
        static const toml::table empty;
        if (const toml::table* s = t.get_as<toml::table>(key)) return *s;
        fail(t.get(key), section + "." + key, section + "." + key + " must be a table");
        return empty;
    }

private:
    void fail(const toml::node* n, const std::string& key, std::string msg) {
        Diagnostic d{file_, 0, 0, key, std::move(msg)};
        if (n) {
            d.line = static_cast<int>(n->source().begin.line);
            d.column = static_cast<int>(n->source().begin.column);
        }
        errs.push_back(std::move(d));
    }
    const toml::table& root_;
    std::string file_;
};

}  // namespace

Result<Policy> Policy::parse(const std::string& text, const std::string& filename) {
    toml::table root;
    if (auto err = detail::parse_document(text, filename, root)) return *err;
    Reader r(root, filename);
    Policy p;
    const toml::table& eff = r.table("efficiency");
    p.gemm_efficiency = r.number(eff, "efficiency", "gemm");
    p.hbm_efficiency = r.number(eff, "efficiency", "hbm");
    p.kernel_overhead_s = r.number(eff, "efficiency", "kernel_overhead_us") * 1e-6;

    const toml::table& attn = r.table("attention");
    p.fallback_arch_ = r.string(attn, "attention", "fallback_architecture");
    for (const auto& [k, v] : attn) {
        if (!v.is_table()) continue;
        const std::string arch(k.str());
        const toml::table& row = *v.as_table();
        const std::string sec = "attention." + arch;
        p.attention_.push_back({arch, {r.number(row, sec, "flash1"), r.number(row, sec, "flash2"), r.number(row, sec, "flash3")}});
    }
    if (!p.knows_architecture(p.fallback_arch_))
        r.errs.push_back({filename, 0, 0, "attention.fallback_architecture",
                          "attention.fallback_architecture = \"" + p.fallback_arch_ + "\" has no row in [attention]"});

    const toml::table& link = r.table("link");
    auto ld = [&](const char* key) {
        const toml::table& row = r.sub(link, "link", key);
        const std::string sec = std::string("link.") + key;
        return LinkDefaults{r.number(row, sec, "efficiency"), r.number(row, sec, "latency_us") * 1e-6,
                            r.number(row, sec, "ring_hop_us") * 1e-6};
    };
    p.nvlink_ = ld("nvlink");
    p.nvswitch_ = ld("nvswitch");
    p.pcie_p2p_ = ld("pcie_p2p");
    p.pcie_no_p2p_ = ld("pcie_no_p2p");
    p.ib_ = ld("infiniband");
    p.roce_ = ld("roce");
    p.eth_ = ld("ethernet");
    p.if_ = ld("infinityfabric");
    p.ici_ = ld("ici");

    const toml::table& inter = r.table("inter_node");
    p.inter_fallback_ = r.string(inter, "inter_node", "fallback");
    p.inter_consumer_ = r.string(inter, "inter_node", "consumer");
    for (const auto& [k, v] : inter) {
        const std::string key(k.str());
        if (key == "fallback" || key == "consumer") continue;
        p.inter_node_.push_back({key, r.string(inter, "inter_node", key)});
    }

    const toml::table& power = r.table("power");
    p.board_fraction_of_tdp = r.number(power, "power", "board_fraction_of_tdp");
    p.node_overhead_fraction_of_tdp = r.number(power, "power", "node_overhead_fraction_of_tdp");
    p.fallback_tdp_w = r.number(power, "power", "fallback_tdp_w");

    const toml::table& off = r.table("offload");
    p.cpu_adam_params_per_s_per_node = r.number(off, "offload", "cpu_adam_params_per_s_per_node");
    p.pcie5_ = r.number(off, "offload", "pcie_gen5_bytes_per_s");
    p.pcie4_ = r.number(off, "offload", "pcie_gen4_bytes_per_s");
    p.pcie3_ = r.number(off, "offload", "pcie_gen3_bytes_per_s");
    p.nvme_bytes_per_s = r.number(off, "offload", "nvme_bytes_per_s");

    const toml::table& mem = r.table("memory");
    p.cuda_context_bytes = r.number(mem, "memory", "cuda_context_mib") * units::MiB;
    p.library_workspace_bytes = r.number(mem, "memory", "library_workspace_mib") * units::MiB;
    p.reserve_fraction_default_segments = r.non_negative(mem, "memory", "reserve_fraction_default_segments");
    p.reserve_fraction_expandable_segments = r.non_negative(mem, "memory", "reserve_fraction_expandable_segments");
    p.communicator_bytes = r.number(mem, "memory", "communicator_mib") * units::MiB;
    p.communicator_pair_bytes = r.number(mem, "memory", "communicator_pair_mib") * units::MiB;
    const double init_channels = r.number(mem, "memory", "nvls_init_channels");
    p.nvls_head_bytes_2_20 = init_channels * r.number(mem, "memory", "nvls_channel_mib_2_20") * units::MiB;
    p.nvls_head_bytes_2_21 = init_channels * r.number(mem, "memory", "nvls_channel_mib_2_21") * units::MiB;
    p.nvls_head_bytes = r.number(mem, "memory", "nvls_channels") * r.number(mem, "memory", "nvls_channel_mib") * units::MiB;
    p.grad_bucket_bytes = r.number(mem, "memory", "grad_bucket_mb") * units::MB;

    const toml::table& ov = r.table("overlap");
    p.tp_comm_exposed_fraction = r.number(ov, "overlap", "tp_comm_exposed_fraction");
    p.nccl_overlap_ctas = r.non_negative(ov, "overlap", "nccl_overlap_ctas");

    const toml::table& host = r.table("host");
    p.launch_queue_depth = r.non_negative(host, "host", "launch_queue_depth");
    p.forward_launch_s = r.non_negative(host, "host", "forward_launch_us") * 1e-6;
    p.backward_launch_s = r.non_negative(host, "host", "backward_launch_us") * 1e-6;
    p.zero3_module_hook_s = r.non_negative(host, "host", "zero3_module_hook_us") * 1e-6;
    p.list_gather_per_rank_s = r.non_negative(host, "host", "list_gather_per_rank_us") * 1e-6;

    const toml::table& ql = r.table("qlora");
    p.gptq_group_size = r.number(ql, "qlora", "gptq_group_size");
    p.gptq_dequant_bytes_per_param = r.number(ql, "qlora", "gptq_dequant_bytes_per_param");
    p.gptq_dequant_bandwidth_share = r.share(ql, "qlora", "gptq_dequant_bandwidth_share");
    // One [stack.NAME] row per stack of the enum table, each complete.
    const toml::table& st = r.table("stack");
    const EnumTable& names = enum_table<Stack>();
    p.stacks_.resize(names.entries.size());
    for (const EnumEntry& e : names.entries) {
        const std::string name = e.name;
        const toml::table& row = r.sub(st, "stack", name);
        const std::string sec = "stack." + name;
        // A row may name a `base` row and give only the keys it changes (a later
        // release of the same code): each key is read where it is set.
        const toml::table* base = nullptr;
        if (const toml::node* b = row.get("base")) {
            const auto* bn = b->as_string();
            base = bn ? st.get_as<toml::table>(bn->get()) : nullptr;
            if (!base || base->contains("base")) {
                r.errs.push_back({filename, static_cast<int>(b->source().begin.line), static_cast<int>(b->source().begin.column), sec + ".base",
                                  sec + ".base must name another stack row that has no base of its own (known: " + names.allowed() + ")"});
                base = nullptr;
            }
        }
        auto from = [&](const char* key) -> const toml::table& { return base && !row.contains(key) ? *base : row; };
        StackConventions c;
        c.loss_logit_copies = r.non_negative(from("loss_logit_copies"), sec, "loss_logit_copies");
        c.loss_fp32_copies = r.non_negative(from("loss_fp32_copies"), sec, "loss_fp32_copies");
        c.loss_in_model = r.boolean(from("loss_in_model"), sec, "loss_in_model");
        {
            const std::string lp = sec + ".loss_passes";
            const toml::table& passes = r.sub(from("loss_passes"), sec, "loss_passes");
            c.loss_fwd_passes16 = r.non_negative(passes, lp, "fwd16");
            c.loss_fwd_passes32 = r.non_negative(passes, lp, "fwd32");
            c.loss_bwd_passes16 = r.non_negative(passes, lp, "bwd16");
            c.loss_bwd_passes32 = r.non_negative(passes, lp, "bwd32");
        }
        c.norm_saved_bytes = r.non_negative(from("norm_saved_bytes"), sec, "norm_saved_bytes");
        c.fused_elementwise = r.boolean(from("fused_elementwise"), sec, "fused_elementwise");
        c.fused_dropout_add_norm = r.boolean(from("fused_dropout_add_norm"), sec, "fused_dropout_add_norm");
        c.gemm_epilogue_gelu = r.boolean(from("gemm_epilogue_gelu"), sec, "gemm_epilogue_gelu");
        c.fused_rope = r.boolean(from("fused_rope"), sec, "fused_rope");
        c.loss_fuses_softcap = r.boolean(from("loss_fuses_softcap"), sec, "loss_fuses_softcap");
        c.fused_swiglu = r.boolean(from("fused_swiglu"), sec, "fused_swiglu");
        c.swiglu_fuses_packed = r.boolean(from("swiglu_fuses_packed"), sec, "swiglu_fuses_packed");
        c.fsdp_units_mix_frozen = r.boolean(from("fsdp_units_mix_frozen"), sec, "fsdp_units_mix_frozen");
        c.checkpoint_reentrant = r.boolean(from("checkpoint_reentrant"), sec, "checkpoint_reentrant");
        c.fsdp_no_sync = r.boolean(from("fsdp_no_sync"), sec, "fsdp_no_sync");
        c.attn_softmax_fp32 = r.boolean(from("attn_softmax_fp32"), sec, "attn_softmax_fp32");
        c.fp32_attention_unfused = r.boolean(from("fp32_attention_unfused"), sec, "fp32_attention_unfused");
        c.selective_recomputes_flash = r.boolean(from("selective_recomputes_flash"), sec, "selective_recomputes_flash");
        c.tensor_parallel = r.boolean(from("tensor_parallel"), sec, "tensor_parallel");
        c.pipeline_parallel = r.boolean(from("pipeline_parallel"), sec, "pipeline_parallel");
        c.context_parallel = r.boolean(from("context_parallel"), sec, "context_parallel");
        c.expert_parallel = r.boolean(from("expert_parallel"), sec, "expert_parallel");
        c.tp_comm_overlap = r.boolean(from("tp_comm_overlap"), sec, "tp_comm_overlap");
        c.activation_offload = r.boolean(from("activation_offload"), sec, "activation_offload");
        c.liger_loss = r.boolean(from("liger_loss"), sec, "liger_loss");
        c.fused_linear_ce_default = r.boolean(from("fused_linear_ce_default"), sec, "fused_linear_ce_default");
        c.packed_qkv = r.boolean(from("packed_qkv"), sec, "packed_qkv");
        c.tp_shard_dim_copies = r.boolean(from("tp_shard_dim_copies"), sec, "tp_shard_dim_copies");
        c.tp_gathers_qk_norm = r.boolean(from("tp_gathers_qk_norm"), sec, "tp_gathers_qk_norm");
        c.gqa_repeats_kv = r.boolean(from("gqa_repeats_kv"), sec, "gqa_repeats_kv");
        c.norm_weight_saved_bytes = r.non_negative(from("norm_weight_saved_bytes"), sec, "norm_weight_saved_bytes");
        c.attn_output_copy = r.boolean(from("attn_output_copy"), sec, "attn_output_copy");
        c.fsdp2 = r.boolean(from("fsdp2"), sec, "fsdp2");
        c.zero_stages = r.zero_stages(from("zero_stages"), sec, "zero_stages");
        c.hybrid_shard = r.boolean(from("hybrid_shard"), sec, "hybrid_shard");
        c.expandable_segments = r.boolean(from("expandable_segments"), sec, "expandable_segments");
        c.optimizer_foreach = r.boolean(from("optimizer_foreach"), sec, "optimizer_foreach");
        c.lora_input_cast = r.boolean(from("lora_input_cast"), sec, "lora_input_cast");
        c.framework = r.choice<Framework>(from("framework"), sec, "framework");
        c.zero_framework = r.choice<Framework>(from("zero_framework"), sec, "zero_framework");
        c.loss = r.string(from("loss"), sec, "loss");
        // The loss as the stack runs it over tensor-parallel ranks (vocab-parallel
        // logits), where that differs: absent keys mean the same as above.
        c.loss_tp_logit_copies = r.optional_non_negative(from("loss_tp_logit_copies"), sec, "loss_tp_logit_copies").value_or(c.loss_logit_copies);
        c.loss_tp_fp32_copies = r.optional_non_negative(from("loss_tp_fp32_copies"), sec, "loss_tp_fp32_copies").value_or(c.loss_fp32_copies);
        c.loss_tp = r.optional_string(from("loss_tp"), sec, "loss_tp").value_or(c.loss);
        c.norms = r.string(from("norms"), sec, "norms");
        c.elementwise = r.string(from("elementwise"), sec, "elementwise");
        p.stacks_[static_cast<size_t>(e.value)] = std::move(c);
    }
    for (const auto& [k, v] : st) {
        const std::string key(k.str());
        if (!names.parse(key) || names.name(*names.parse(key)) != key)
            r.errs.push_back({filename, static_cast<int>(v.source().begin.line), 0, "stack." + key,
                              "[stack." + key + "] is not a stack (known: " + names.allowed() + ")"});
    }

    if (!r.errs.empty()) return Error(std::move(r.errs));
    return p;
}

const LinkDefaults& Policy::link(LinkKind k, bool p2p) const {
    switch (k) {
        case LinkKind::NVLink: return nvlink_;
        case LinkKind::NVSwitch: return nvswitch_;
        case LinkKind::PCIe: return p2p ? pcie_p2p_ : pcie_no_p2p_;
        case LinkKind::InfiniBand: return ib_;
        case LinkKind::RoCE: return roce_;
        case LinkKind::Ethernet: return eth_;
        case LinkKind::InfinityFabric: return if_;
        case LinkKind::ICI: return ici_;
    }
    return eth_;
}

bool Policy::knows_architecture(const std::string& arch) const {
    for (const auto& [name, a] : attention_)
        if (name == arch) return true;
    return false;
}

AttentionEfficiency Policy::attention(const std::string& arch, AttentionKernel k) const {
    // Rows are the keys of one TOML table (unique): the first match is the row, and
    // the fallback row is looked for only when the architecture has none.
    auto find = [this](const std::string& n) -> const Attn* {
        for (const auto& [name, a] : attention_)
            if (name == n) return &a;
        return nullptr;
    };
    const Attn* row = find(arch);
    AttentionEfficiency e;
    e.fallback = row == nullptr;
    const Attn& a = row ? *row : *find(fallback_arch_);
    e.value = k == AttentionKernel::Flash1 ? a.flash1 : k == AttentionKernel::Flash2 ? a.flash2 : a.flash3;
    return e;
}

double Policy::pcie_bytes_per_s(int gen) const { return gen >= 5 ? pcie5_ : gen == 4 ? pcie4_ : pcie3_; }

std::string pcie_link_id(const GpuSpec& g) {
    const int gen = g.pcie_gen > 0 ? std::min(g.pcie_gen, 5) : 4;
    return "pcie" + std::to_string(gen) + "-x16" + (g.p2p ? "" : "-nop2p");
}

std::string Policy::inter_node_link_id(const GpuSpec& g) const {
    for (const auto& [arch, id] : inter_node_)
        if (arch == g.architecture) return id;
    return g.consumer ? inter_consumer_ : inter_fallback_;
}

const std::string& embedded_defaults_toml() {
    static const std::string s(kEmbeddedDefaultsToml);
    return s;
}

const Policy& policy() {
    static const Policy p = [] {
        auto r = Policy::parse(embedded_defaults_toml(), "data/defaults.toml");
        // The file is ours and checked by the test suite; a broken one is a build bug.
        assert(r.has_value());
        if (!r) std::abort();
        return std::move(r).value();
    }();
    return p;
}

std::optional<Diagnostic> architecture_warning(const GpuSpec& g) {
    if (policy().knows_architecture(g.architecture)) return std::nullopt;
    const std::string& fb = policy().fallback_architecture();
    return Diagnostic{"", 0, 0, "architecture",
                      "GPU " + (g.id.empty() ? g.name : g.id) + ": architecture = \"" + g.architecture +
                          "\" is not in data/defaults.toml [attention]; using the \"" + fb + "\" attention efficiencies"};
}

}  // namespace trainplan
