// Policy as data: the defaults the model uses where a preset gives no measured
// figure (fallback efficiencies, attention efficiency per architecture x kernel,
// kernel launch gap, link-kind efficiencies and latencies, default inter-node
// fabric per GPU generation, power and offload factors). They live, each with
// its source, in data/defaults.toml, which the build embeds; core parses it
// once (no file I/O at run time). One accessor per fact.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainplan/hardware.hpp"
#include "trainplan/result.hpp"
#include "trainplan/training.hpp"

namespace trainplan {

struct LinkDefaults {
    double efficiency = 0;  // achieved bus bandwidth / link bandwidth
    double latency_s = 0;   // per ring step
    double ring_hop_s = 0;  // what each hop of a ring over many ranks adds (NCCL's per-step latency)
};

struct AttentionEfficiency {
    double value = 0;        // fraction of the 16-bit peak
    bool fallback = false;   // the GPU's architecture has no row: the fallback row's value
};

// The kernel and memory conventions of one training stack (data/defaults.toml
// [stack.NAME], each value with its source there).
struct StackConventions {
    // Logits-sized tensors live at the loss, on top of the stored activations, at
    // the end of the last micro-batch's forward / start of its backward: copies
    // in the activation dtype and in fp32.
    double loss_logit_copies = 0;
    double loss_fp32_copies = 0;
    // The same where the loss runs over tensor-parallel ranks (tp > 1) on
    // vocab-sharded logits, and the words for it (data/defaults.toml loss_tp_*;
    // absent: as above).
    double loss_tp_logit_copies = 0;
    double loss_tp_fp32_copies = 0;
    std::string loss_tp;
    // HBM passes over logits-sized tensors the loss makes (each read or write of
    // one, a reduction's read included), in the activation dtype and in fp32,
    // forward and backward (data/defaults.toml [stack.*] loss_passes).
    double loss_fwd_passes16 = 0, loss_fwd_passes32 = 0, loss_bwd_passes16 = 0, loss_bwd_passes32 = 0;
    // The loss is the model code's own (transformers' CrossEntropyLoss on the
    // logits its forward returns): the copies above assume the model upcasts
    // them; a model that does not gets loss_copies() (opgraph.hpp) instead.
    bool loss_in_model = false;
    // Bytes per element each norm keeps of its input for backward (4 = the fp32
    // copy an eager RMSNorm / LayerNorm saves; 0 = the activation dtype).
    double norm_saved_bytes = 0;
    bool fused_elementwise = false;  // norms, residual adds, RoPE as fused kernels (one read, one write)
    // Dropout, residual add and the next norm as one kernel over an fp32 residual
    // stream (flash-attn's dropout_add_layer_norm), and a non-gated MLP's bias and
    // GELU in the GEMM's epilogue (cuBLASLt GELU_AUX_BIAS / DGELU_BGRAD).
    bool fused_dropout_add_norm = false;
    bool gemm_epilogue_gelu = false;
    bool loss_fuses_softcap = false;  // the loss kernel applies the final logit soft-cap itself (no 16-bit capped copy)
    bool fused_rope = false;         // the rotary embedding as one kernel per tensor (also beside eager element-wise ops)
    bool fused_swiglu = false;       // the gated activation recomputes silu(gate) in backward: keeps gate and up only
    // ... and, where the gate and up weights share one storage (DeepSpeed ZeRO-1/2
    // flat parameter buffers), a packed kernel that also recomputes act(gate) * up.
    bool swiglu_fuses_packed = false;
    // Under FSDP: blocks wrapped frozen base and adapters together (use_orig_params):
    // the frozen weights carry gradients too; and accumulation inside no_sync():
    // gradients held unsharded until the step's last micro-batch.
    bool fsdp_units_mix_frozen = false;
    // Its activation checkpointing is reentrant (TrainingSetup::checkpoint_reentrant).
    bool checkpoint_reentrant = false;
    bool fsdp_no_sync = false;
    // Eager (non-flash) attention's softmax writes fp32 probabilities, which its
    // backward keeps, and the 16-bit cast of them that P x V keeps: 4 + 2 B per
    // score element instead of 2.
    bool attn_softmax_fp32 = false;
    // Under fp32 training the stack's fused attention has no kernel to run (every
    // fused backend takes fp16 / bf16 only) and it runs eager attention instead.
    bool fp32_attention_unfused = false;
    // Selective recompute checkpoints the fused attention kernel too (its forward
    // runs again in backward), not only eager attention's s x s ops.
    bool selective_recomputes_flash = true;
    // The model parallelism the stack's model code and loop can run: tensor
    // (with sequence parallelism), pipeline (with interleaving), context and
    // expert parallelism, and TP communication overlap. Data parallelism (DDP,
    // ZeRO, FSDP) every stack runs.
    bool tensor_parallel = false, pipeline_parallel = false, context_parallel = false, expert_parallel = false;
    bool tp_comm_overlap = false;
    // Saved activations moved to host memory and back (Megatron-Core
    // --cpu-offloading, torchtune enable_activation_offloading, Unsloth's offloaded
    // gradient checkpointing).
    bool activation_offload = false;
    // Liger's fused linear cross-entropy can replace the model's head and loss
    // (transformers model code): data/defaults.toml [stack.*] liger_loss.
    bool liger_loss = false;
    // ... and the run has it on unless told otherwise (Liger's model patch).
    bool fused_linear_ce_default = false;
    // The model code computes q, k and v in one module whatever the architecture
    // (Megatron's linear_qkv): data/defaults.toml [stack.*] packed_qkv.
    bool packed_qkv = false;
    // Its tensor parallelism is DTensor's: sequence-parallel collectives gather and
    // scatter along the sequence dimension, which torch's functional collectives
    // move to and from dimension 0 with a full-size copy each: data/defaults.toml
    // [stack.*] tp_shard_dim_copies.
    bool tp_shard_dim_copies = false;
    // Its TP plan keeps the per-head q / k norms unsharded (torchtitan's Qwen3 before
    // PR #1870): q and k are gathered to every rank each forward and RoPE runs on all
    // heads: data/defaults.toml [stack.*] tp_gathers_qk_norm.
    bool tp_gathers_qk_norm = false;
    // Its model code repeats K and V to every query head before the attention kernel
    // under grouped-query attention (LitGPT's CausalSelfAttention: k.expand + reshape,
    // later repeat_interleave, "flash attention requires it in training mode"): the
    // kernel keeps K and V at the query width, and a copy runs each way: data/defaults.toml
    // [stack.*] gqa_repeats_kv.
    bool gqa_repeats_kv = false;
    // Its eager RMSNorm multiplies the normalized 16-bit input by the weight as a
    // separate op (transformers' LlamaRMSNorm `self.weight * hidden_states.to(input_dtype)`,
    // LitGPT's, torchtune's, torch's composite rms_norm), which keeps that operand for the
    // weight's gradient while the weight trains: bytes per element (0: fused norms):
    // data/defaults.toml [stack.*] norm_weight_saved_bytes.
    double norm_weight_saved_bytes = 0;
    // Its attention returns through a transpose copy (SDPA's [b, heads, s, d] output
    // made contiguous as [b, s, heads x d]) that the output projection keeps, beside the
    // output the kernel keeps for its own backward: data/defaults.toml [stack.*]
    // attn_output_copy.
    bool attn_output_copy = false;
    // Its FSDP is torch's fully_shard (FSDP2): each layer's all-gather is prefetched
    // behind the layer before it and its reduce-scatter runs behind the next one's
    // backward, while the copies out of the gathered buffer and into the reduction's
    // buffer run on the compute stream: data/defaults.toml [stack.*] fsdp2.
    bool fsdp2 = false;
    // The data-parallel sharding its own training loop offers, as ZeRO stages:
    // 0 DDP, 1 a sharded optimizer (Megatron's distributed optimizer, DeepSpeed
    // ZeRO-1), 2 sharded gradients too (ZeRO-2, FSDP SHARD_GRAD_OP /
    // reshard_after_forward=False), 3 sharded weights (ZeRO-3, FSDP FULL_SHARD);
    // and whether it shards inside the node and replicates across nodes (FSDP
    // HYBRID_SHARD, HSDP). `trainplan plan` searches only these: data/defaults.toml
    // [stack.*] zero_stages, hybrid_shard. (A scenario may still spell another
    // stage under the stack's model code, as a ZeRO-3 run compared against
    // Megatron-LM's.)
    std::vector<int> zero_stages{0, 1, 2, 3};
    bool hybrid_shard = true;
    // Its runs set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (TrainingSetup::
    // expandable_segments; the reserve per mode: Policy::reserve_fraction_*).
    bool expandable_segments = false;
    // AdamW as torch's multi-tensor (foreach) implementation, one memory pass per
    // _foreach op, rather than one fused kernel (time side).
    bool optimizer_foreach = false;
    // The LoRA layer casts its input to the adapter weights' dtype before the
    // adapter path (PEFT's lora Linear.forward): data/defaults.toml [stack.*]
    // lora_input_cast.
    bool lora_input_cast = false;
    // The engine whose bookkeeping a run of the stack has when the scenario names
    // no framework (the resolver applies it): without ZeRO, and under ZeRO 1-3
    // without FSDP.
    Framework framework = Framework::DeepSpeed;
    Framework zero_framework = Framework::DeepSpeed;
    // Short descriptions for the "assumes:" line.
    std::string loss, norms, elementwise;
};

class Policy {
public:
    double gemm_efficiency = 0;      // large-GEMM fraction of peak, when the GPU preset has none
    double hbm_efficiency = 0;       // HBM fraction, when the GPU preset has none
    double kernel_overhead_s = 0;    // launch gap per kernel
    double board_fraction_of_tdp = 0;
    double node_overhead_fraction_of_tdp = 0;
    double fallback_tdp_w = 0;
    double cpu_adam_params_per_s_per_node = 0;
    double nvme_bytes_per_s = 0;
    // Per-process memory overheads ([memory]; memory.hpp MemoryDefaults reads them).
    double cuda_context_bytes = 0;
    double library_workspace_bytes = 0;
    // The caching allocator's reserve (reserved - allocated) as a share of the
    // transient bytes it cycles through, by how it maps memory ([memory]).
    double reserve_fraction_default_segments = 0;
    double reserve_fraction_expandable_segments = 0;
    double communicator_bytes = 0;       // NCCL buffers of one communicator of more than two ranks
    double communicator_pair_bytes = 0;  // ... of a two-rank communicator
    // NVLS buffers per GPU of a communicator's node, by NCCL release ([memory]).
    double nvls_head_bytes_2_20 = 0;  // 2.17-2.20
    double nvls_head_bytes_2_21 = 0;
    double nvls_head_bytes = 0;       // 2.22 and later
    double grad_bucket_bytes = 0;
    // Share of the TP collectives left exposed under --tp-comm-overlap ([overlap]).
    double tp_comm_exposed_fraction = 0;
    double nccl_overlap_ctas = 0;  // SMs an overlapped NCCL collective holds ([overlap])
    // GPTQ int4 bases ([qlora]): group size and the HBM bytes per parameter of
    // auto-gptq's torch dequantization path.
    double gptq_group_size = 0;
    double gptq_dequant_bytes_per_param = 0;
    double gptq_dequant_bandwidth_share = 1;  // of the effective HBM bandwidth
    // Kernel launches a stream queues before the host blocks ([host]).
    double launch_queue_depth = 0;
    // Host time to issue a forward kernel, and the backward per forward kernel ([host]).
    double forward_launch_s = 0;
    double backward_launch_s = 0;
    double zero3_module_hook_s = 0;  // [host] zero3_module_hook_us
    double list_gather_per_rank_s = 0;  // [host] list_gather_per_rank_us

    [[nodiscard]] const StackConventions& stack(Stack k) const { return stacks_[static_cast<size_t>(k)]; }
    [[nodiscard]] const LinkDefaults& link(LinkKind k, bool p2p) const;
    [[nodiscard]] AttentionEfficiency attention(const std::string& architecture, AttentionKernel k) const;
    [[nodiscard]] bool knows_architecture(const std::string& architecture) const;
    [[nodiscard]] const std::string& fallback_architecture() const { return fallback_arch_; }
    // Host <-> GPU copy bandwidth over PCIe of a generation.
    [[nodiscard]] double pcie_bytes_per_s(int generation) const;
    // Link preset between nodes when a scenario names none.
    [[nodiscard]] std::string inter_node_link_id(const GpuSpec& g) const;

    // Parses the defaults file (the embedded one by default); errors name the key.
    [[nodiscard]] static Result<Policy> parse(const std::string& toml_text, const std::string& filename);

private:
    struct Attn { double flash1 = 0, flash2 = 0, flash3 = 0; };
    std::vector<std::pair<std::string, Attn>> attention_;
    std::string fallback_arch_;
    LinkDefaults nvlink_, nvswitch_, pcie_p2p_, pcie_no_p2p_, ib_, roce_, eth_, if_, ici_;
    double pcie5_ = 0, pcie4_ = 0, pcie3_ = 0;
    std::vector<std::pair<std::string, std::string>> inter_node_;
    std::string inter_fallback_, inter_consumer_;
    std::vector<StackConventions> stacks_;  // indexed by Stack
};

// The embedded data/defaults.toml, parsed once.
[[nodiscard]] const Policy& policy();
// Its text (for tests and `trainplan` to show where a default comes from).
[[nodiscard]] const std::string& embedded_defaults_toml();

// The one accessor callers use for the fabric default.
[[nodiscard]] inline std::string default_inter_node_link_id(const GpuSpec& g) { return policy().inter_node_link_id(g); }

// The PCIe link preset a GPU sits on at full width: its PCIe generation (4 when the
// preset gives none, at most 5), x16, through host memory when it has no P2P.
[[nodiscard]] std::string pcie_link_id(const GpuSpec& g);
// Inside a node when a scenario names no link: the GPU's own NVLink when it joins all
// gpus_per_node GPUs (a 2-way bridge joins two: more cards ring over PCIe), else its PCIe link.
[[nodiscard]] inline std::string default_intra_node_link_id(const GpuSpec& g, int gpus_per_node = 0) {
    const bool nvlink_spans = !g.nvlink.empty() && (g.nvlink_gpus == 0 || gpus_per_node <= g.nvlink_gpus);
    return nvlink_spans ? g.nvlink : pcie_link_id(g);
}

// A warning when the GPU's architecture string has no row in the policy table:
// names the architecture and the fallback whose figures are used. Empty when known.
[[nodiscard]] std::optional<Diagnostic> architecture_warning(const GpuSpec& g);

}  // namespace trainplan
