#include "scenario_flags.hpp"

#include "trainplan/calibrate.hpp"

namespace trainplan::cli {

void add_scenario_flags(CLI::App& app, ScenarioFlags& f, bool model_required) {
    auto* m = app.add_option("model", f.model,
                             "Model: preset name (trainplan models), size shorthand (7b, 13b, 70b), a model TOML file, "
                             "or a Hugging Face config.json");
    if (model_required) m->required(false);  // may come from --scenario
    app.add_option("--scenario", f.scenario_file, "Scenario TOML file; flags override its values");
    app.add_option("--calibration", f.calibration_file, "Calibration profile from `trainplan calibrate -o` (fitted efficiency factors)");
    app.add_option("--presets", f.preset_dirs, "Extra preset directory (holds models/ and hardware/); repeatable");

    auto* hw = "Hardware";
    app.add_option("--gpu", f.gpu, "GPU preset (trainplan gpus)")->group(hw);
    app.add_option("--gpus", f.gpus, "Number of GPUs (default 1)")->group(hw);
    app.add_option("--gpus-per-node", f.gpus_per_node, "GPUs per node (default min(gpus, 8) or the node preset)")->group(hw);
    app.add_option("--node", f.node, "Node preset (trainplan nodes): GPU, links and NICs")->group(hw);
    app.add_option("--intra-node", f.intra_node, "Link preset between GPUs of a node")->group(hw);
    app.add_option("--inter-node", f.inter_node, "Link preset between nodes")->group(hw);
    app.add_option("--nics-per-node", f.nics_per_node, "Network adapters per node")->group(hw);

    auto* tr = "Training";
    app.add_option("--method", f.method, "full | lora | qlora (default full)")->group(tr);
    app.add_option("--lora-rank", f.lora_rank, "LoRA rank (default 16)")->group(tr);
    app.add_option("--lora-alpha", f.lora_alpha, "LoRA alpha (default 32)")->group(tr);
    app.add_option("--lora-dropout", f.lora_dropout, "LoRA dropout (default 0.05)")->group(tr);
    app.add_option("--lora-targets", f.lora_targets, "q,k,v,o,gate,up,down | attention | mlp | all (default all)")->group(tr);
    app.add_option("--quant", f.quant, "QLoRA base quantization: nf4 | fp4 (default nf4)")->group(tr);
    app.add_option("--double-quant", f.double_quant, "QLoRA double quantization: on | off (default on)")->group(tr);
    app.add_option("--paged-optimizer", f.paged_optimizer, "QLoRA paged optimizer: on | off (default on)")->group(tr);
    app.add_option("--precision", f.precision, "fp32 | fp16-mixed | bf16-mixed | bf16 | fp8-mixed (default bf16-mixed)")->group(tr);
    app.add_option("--optimizer", f.optimizer, "adamw | adamw-8bit | sgd | sgd-momentum | adafactor | lion (default adamw)")->group(tr);
    app.add_option("--framework", f.framework, "Bookkeeping convention: deepspeed | megatron | pytorch-amp (default deepspeed)")->group(tr);
    app.add_option("--zero", f.zero, "ZeRO stage 0-3 (default 0)")->group(tr);
    app.add_option("--fsdp", f.fsdp, "none | full-shard | shard-grad-op | hybrid-shard | no-shard")->group(tr);
    app.add_option("--offload-optimizer", f.offload_optimizer, "none | cpu | nvme")->group(tr);
    app.add_option("--offload-params", f.offload_params, "none | cpu | nvme (needs --zero 3)")->group(tr);
    app.add_option("--recompute", f.recompute, "Activation recompute: none | selective | full (default none)")->group(tr);
    app.add_option("--flash-attention", f.flash_attention, "on | off (default on)")->group(tr);
    app.add_option("--attention-kernel", f.attention_kernel, "flash1 | flash2 | flash3 (default flash2: PyTorch SDPA / flash-attn 2)")->group(tr);
    app.add_option("--seq-len", f.seq_len, "Sequence length (default 2048)")->group(tr);
    app.add_option("--micro-batch", f.micro_batch, "Micro-batch size per GPU (default 1)")->group(tr);
    app.add_option("--grad-accum", f.grad_accum, "Gradient accumulation steps (default 1)")->group(tr);
    app.add_option("--global-batch", f.global_batch, "Global batch in sequences (sets accumulation)")->group(tr);
    app.add_option("--framework-overhead-gib", f.framework_overhead_gib, "Override CUDA context + library + NCCL overhead (GiB)")->group(tr);
    app.add_option("--fragmentation", f.fragmentation, "Override allocator fragmentation reserve (fraction, default 0.05)")->group(tr);

    auto* par = "Parallel layout";
    app.add_option("--tp", f.tp, "Tensor parallel size")->group(par);
    app.add_option("--pp", f.pp, "Pipeline parallel size")->group(par);
    app.add_option("--dp", f.dp, "Data parallel size (default gpus / (tp x pp))")->group(par);
    app.add_option("--ep", f.ep, "Expert parallel size (MoE)")->group(par);
    app.add_option("--vp", f.vp, "Interleaved pipeline chunks per stage")->group(par);
    app.add_flag("--sp,--sequence-parallel", f.sequence_parallel, "Sequence parallelism (with tp > 1)")->group(par);
    app.add_flag("--tp-comm-overlap", f.tp_comm_overlap, "Overlap TP collectives with GEMMs (Megatron-Core --tp-comm-overlap)")->group(par);
    app.add_option("--schedule", f.schedule, "Pipeline schedule: 1f1b | interleaved | gpipe")->group(par);
}

namespace {

struct Conv {
    std::vector<Diagnostic> errs;
    ScenarioInput in;

    void flag(const std::string& key) { in.origin[key] = Origin{"", 0, 0}; }

    template <class T, class P>
    std::optional<T> choice(const std::optional<std::string>& v, const char* flag, P parse, const char* allowed) {
        if (!v) return std::nullopt;
        auto r = parse(*v);
        if (!r) errs.push_back({"", 0, 0, flag, std::string(flag) + " = \"" + *v + "\" is not one of: " + allowed});
        return r;
    }
    std::optional<bool> onoff(const std::optional<std::string>& v, const char* flag) {
        if (!v) return std::nullopt;
        std::string s = *v;
        for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (s == "on" || s == "true" || s == "yes" || s == "1") return true;
        if (s == "off" || s == "false" || s == "no" || s == "0") return false;
        errs.push_back({"", 0, 0, flag, std::string(flag) + " = \"" + *v + "\" must be on or off"});
        return std::nullopt;
    }
    template <class T>
    std::optional<T> range(const std::optional<std::int64_t>& v, const char* flag, std::int64_t lo, std::int64_t hi) {
        if (!v) return std::nullopt;
        if (*v < lo || *v > hi) {
            errs.push_back({"", 0, 0, flag, std::string(flag) + " = " + std::to_string(*v) +
                                                (*v < lo ? " must be at least " + std::to_string(lo)
                                                         : " exceeds the maximum " + std::to_string(hi))});
            return std::nullopt;
        }
        return static_cast<T>(*v);
    }
    std::optional<double> frange(const std::optional<double>& v, const char* flag, double lo, double hi) {
        if (!v) return std::nullopt;
        if (!(*v >= lo && *v <= hi)) {
            std::ostringstream o;
            o << flag << " = " << *v << " must be between " << lo << " and " << hi;
            errs.push_back({"", 0, 0, flag, o.str()});
            return std::nullopt;
        }
        return v;
    }
};

}  // namespace

Result<Scenario> build_scenario(const ScenarioFlags& f, FilePresets& presets, std::int64_t* deferred_global_batch) {
    ScenarioInput base;
    if (!f.scenario_file.empty()) {
        std::string text, why;
        if (!read_text_file(f.scenario_file, text, why))
            return Diagnostic{f.scenario_file, 0, 0, "--scenario", "cannot read scenario file: " + why};
        auto parsed = parse_scenario_toml(text, f.scenario_file, f.extra_sections);
        if (!parsed) return parsed.error();
        base = *parsed;
    }

    Conv c;
    ScenarioInput& in = c.in;
    if (!f.model.empty()) in.model = f.model;
    in.gpu = f.gpu;
    in.node = f.node;
    in.intra_node = f.intra_node;
    in.inter_node = f.inter_node;
    constexpr std::int64_t kMaxGpus = 1 << 20;
    in.gpus = c.range<int>(f.gpus, "--gpus", 1, kMaxGpus);
    in.gpus_per_node = c.range<int>(f.gpus_per_node, "--gpus-per-node", 1, 4096);
    in.nics_per_node = c.range<int>(f.nics_per_node, "--nics-per-node", 1, 4096);
    in.method = c.choice<Method>(f.method, "--method", parse_method, "full, lora, qlora");
    in.precision = c.choice<Precision>(f.precision, "--precision", parse_precision, "fp32, fp16-mixed, bf16-mixed, bf16, fp8-mixed");
    in.optimizer = c.choice<OptimizerKind>(f.optimizer, "--optimizer", parse_optimizer, "adamw, adamw-8bit, sgd, sgd-momentum, adafactor, lion");
    in.framework = c.choice<Framework>(f.framework, "--framework", parse_framework, "deepspeed, megatron, pytorch-amp");
    in.fsdp = c.choice<FsdpStrategy>(f.fsdp, "--fsdp", parse_fsdp, "none, full-shard, shard-grad-op, hybrid-shard, no-shard");
    in.optimizer_offload = c.choice<Offload>(f.offload_optimizer, "--offload-optimizer", parse_offload, "none, cpu, nvme");
    in.param_offload = c.choice<Offload>(f.offload_params, "--offload-params", parse_offload, "none, cpu, nvme");
    in.recompute = c.choice<Recompute>(f.recompute, "--recompute", parse_recompute, "none, selective, full");
    in.schedule = c.choice<Schedule>(f.schedule, "--schedule", parse_schedule, "1f1b, interleaved, gpipe");
    in.attention_kernel = c.choice<AttentionKernel>(f.attention_kernel, "--attention-kernel", parse_attention_kernel, "flash1, flash2, flash3");
    in.quant = c.choice<QuantType>(f.quant, "--quant", parse_quant, "nf4, fp4");
    in.flash_attention = c.onoff(f.flash_attention, "--flash-attention");
    in.double_quant = c.onoff(f.double_quant, "--double-quant");
    in.paged_optimizer = c.onoff(f.paged_optimizer, "--paged-optimizer");
    if (f.lora_targets) {
        in.lora_targets = parse_lora_targets(*f.lora_targets);
        if (!in.lora_targets)
            c.errs.push_back({"", 0, 0, "--lora-targets", "--lora-targets = \"" + *f.lora_targets +
                                                              "\" must list modules from: q, k, v, o, gate, up, down (or all, attention, mlp)"});
    }
    in.lora_rank = c.range<int>(f.lora_rank, "--lora-rank", 1, 65536);
    in.lora_alpha = c.frange(f.lora_alpha, "--lora-alpha", 0, 1e6);
    in.lora_dropout = c.frange(f.lora_dropout, "--lora-dropout", 0, 0.99);
    in.zero = c.range<int>(f.zero, "--zero", 0, 3);
    in.seq_len = c.range<std::int64_t>(f.seq_len, "--seq-len", 1, 16 * 1024 * 1024);
    in.micro_batch = c.range<std::int64_t>(f.micro_batch, "--micro-batch", 1, 1 << 20);
    in.grad_accum = c.range<std::int64_t>(f.grad_accum, "--grad-accum", 1, 1 << 24);
    in.global_batch = c.range<std::int64_t>(f.global_batch, "--global-batch", 1, std::int64_t{1} << 40);
    in.tp = c.range<int>(f.tp, "--tp", 1, 1 << 16);
    in.pp = c.range<int>(f.pp, "--pp", 1, 1 << 16);
    in.dp = c.range<int>(f.dp, "--dp", 1, kMaxGpus);
    in.ep = c.range<int>(f.ep, "--ep", 1, 1 << 16);
    in.vp = c.range<int>(f.vp, "--vp", 1, 1024);
    in.framework_overhead_gib = c.frange(f.framework_overhead_gib, "--framework-overhead-gib", 0, 1024);
    in.fragmentation = c.frange(f.fragmentation, "--fragmentation", 0, 1);
    if (f.sequence_parallel) in.sequence_parallel = true;
    if (f.tp_comm_overlap) in.tp_comm_overlap = true;
    if (!c.errs.empty()) return Error(c.errs);

    // Flags win over the scenario file; a key set by a flag is reported as the flag.
    ScenarioInput merged = base;
    // Drop file origins for keys the flags override, so messages name the flag.
    auto drop = [&](bool set, const char* key) { if (set) merged.origin.erase(key); };
    drop(in.gpus.has_value(), "gpus");
    drop(in.tp.has_value(), "tp");
    drop(in.pp.has_value(), "pp");
    drop(in.dp.has_value(), "dp");
    drop(in.ep.has_value(), "ep");
    drop(in.vp.has_value(), "vp");
    drop(in.zero.has_value(), "zero");
    drop(in.seq_len.has_value(), "seq_len");
    drop(in.micro_batch.has_value(), "micro_batch");
    drop(in.global_batch.has_value(), "global_batch");
    drop(in.grad_accum.has_value(), "grad_accum");
    drop(in.precision.has_value(), "precision");
    drop(in.model.has_value(), "model");
    drop(in.gpu.has_value(), "gpu");
    merged.merge(in);
    if (deferred_global_batch) {
        *deferred_global_batch = merged.global_batch.value_or(0);
        merged.global_batch.reset();
        if (*deferred_global_batch > 0) merged.grad_accum.reset();
    }
    auto resolved = resolve_scenario(merged, presets);
    if (!resolved || f.calibration_file.empty()) return resolved;
    // Calibration hook: the fitted profile rides in the scenario (calibrate.hpp).
    std::string text, why;
    if (!read_text_file(f.calibration_file, text, why))
        return Diagnostic{f.calibration_file, 0, 0, "--calibration", "cannot read calibration profile: " + why};
    auto cal = parse_calibration_toml(text, f.calibration_file);
    if (!cal) return cal.error();
    resolved->calibration = *cal;
    return resolved;
}

}  // namespace trainplan::cli
