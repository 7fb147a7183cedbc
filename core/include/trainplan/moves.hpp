// Moves: the scenario transformations every service shares (fit remedies,
// advise, plan's inverse queries, size and the GUI editor). Each move changes a
// scenario and records one line per changed setting ("recompute: none -> full");
// it returns false when it has nothing to change. Moves do not check
// feasibility: callers pre-check the result with the rules (validate()).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainplan/training.hpp"

namespace trainplan {

// What a chain of moves changed, one line per setting, in order.
struct Changes {
    std::vector<std::string> lines;
    // "key: from -> to" (+ note); a later change of the same key rewrites the
    // earlier line, so selective then full recompute reads "none -> full".
    void note(const std::string& key, const std::string& from, const std::string& to, const std::string& extra = "");
};

// ---- method recipes
// The one recipe per training method, applied wherever a method is chosen: the
// scenario resolver (as defaults that explicit keys override), fit and advise
// remedies and the GUI's method selector.
// QLoRA (Dettmers et al. 2023, "QLoRA: Efficient Finetuning of Quantized LLMs",
// Sec. 3-4 and App. B): 4-bit NormalFloat base with double quantization (block
// 64), bf16 compute, LoRA adapters on all linear transformer layers (needed to
// match full fine-tuning; their Fig. 4 finds the rank itself matters little, so
// the configured rank is kept), gradient checkpointing and paged AdamW.
// LoRA and full training have no recipe beyond leaving QLoRA's bf16 weights
// (pure bf16 goes back to bf16 autocast with fp32 master weights).
void apply_method_recipe(TrainingSetup& t, Method m);
bool set_method(Scenario& s, Method m, Changes& ch);

// ---- single settings
bool set_recompute(Scenario& s, Recompute r, Changes& ch);      // either direction
bool set_flash_attention(Scenario& s, Changes& ch);
// Liger's fused linear cross-entropy where the stack's model code takes it.
bool set_fused_linear_ce(Scenario& s, Changes& ch);
// torch DDP's gradient_as_bucket_view=True: drops the bucket copy of the gradients
// (false where the run is not plain torch DDP or the view is already on).
bool set_ddp_bucket_view(Scenario& s, Changes& ch);
// Prepare the 4-bit model without PEFT's fp32 upcast (kbit_upcast off): false where
// the upcast does not run (fp32_stream).
bool unset_kbit_upcast(Scenario& s, Changes& ch);
// Step and free each gradient in backward (torchtune optimizer_in_bwd): false where
// the run accumulates gradients, offloads the optimizer, or an engine (DeepSpeed
// ZeRO, Megatron) owns the step, and where it is already on.
bool set_optimizer_in_backward(Scenario& s, Changes& ch);
// DeepSpeed ZeRO-1/2 overlap_comm on: the gradient buckets are reduced on their own
// stream under backward (and double-buffered); false where it does not apply or is on.
bool set_ds_overlap_comm(Scenario& s, Changes& ch);
// DeepSpeed v0.12.4 or later with overlap_comm, where the run reduces per rank (training.hpp ds_reduce_per_rank).
bool upgrade_ds_reduce(Scenario& s, Changes& ch);
// DeepSpeed ZeRO-3 sub_group_size down to 1e8 elements: the optimizer step copies
// the gradients 1e8 elements at a time (false where the step's copies are not what
// sets the peak, or the sub-groups are already that small).
bool shrink_ds_sub_group(Scenario& s, Changes& ch);
// NCCL_NVLS_ENABLE=0: no NVLink SHARP buffers (false where the run holds none;
// NeMo-Framework-Launcher sets it to save memory, PR #127).
bool disable_nvls(Scenario& s, Changes& ch);
bool set_precision(Scenario& s, Precision p, Changes& ch);
bool set_optimizer(Scenario& s, OptimizerKind o, Changes& ch);
bool set_zero(Scenario& s, int stage, Changes& ch);              // needs dp > 1 to shard anything
// DeepSpeed ZeRO-3 down to ZeRO-2: the 16-bit weights stay whole on every rank, so no
// per-module hooks fetch and release them (false where the run is not DeepSpeed ZeRO-3;
// with one rank ZeRO-3 shards nothing and this costs no memory).
bool leave_zero3(Scenario& s, Changes& ch);
// ZeRO-Offload: optimizer step on the CPU (raises ZeRO to 1 under PP, else 2).
bool offload_optimizer(Scenario& s, Changes& ch);
// ZeRO-Infinity: weights too (ZeRO-3 and optimizer offload).
bool offload_params(Scenario& s, Changes& ch);

// ---- batch and GPU count, keeping the global batch
// Micro-batch `mb` with the accumulation that keeps micro_batch x grad_accum
// (the per-replica batch); false when mb does not divide it.
bool set_micro_batch(Scenario& s, std::int64_t mb, Changes& ch);
// The largest halving of the micro-batch that fits in memory (else 1).
bool shrink_micro_batch(Scenario& s, Changes& ch);
// The largest micro-batch that fits and divides the per-replica batch.
bool grow_micro_batch(Scenario& s, Changes& ch);
// Accumulation steps `ga`: a different global batch (changes what is trained).
bool set_grad_accum(Scenario& s, std::int64_t ga, Changes& ch);
// `gpus` GPUs in data parallel (same tp x pp), same global batch: dp and the
// accumulation follow; the micro-batch shrinks if it must to keep the batch
// whole. False when the GPU count does not split into tp x pp, or the batch
// has fewer sequences than replicas -- unless `grow_batch`, which then rounds
// the global batch up to one sequence per replica (noted). A single-node
// cluster grows as servers of kGpusPerServer.
bool set_data_parallel(Scenario& s, int gpus, Changes& ch, bool grow_batch = false);

// The usual server size (DGX/HGX and 8-GPU PCIe boxes): the node a one-node
// scenario grows into when a move or a search adds GPUs.
inline constexpr int kGpusPerServer = 8;
// The node size to grow with: the cluster's, or a server's when the cluster is
// just the GPUs of one partly filled box.
[[nodiscard]] int growth_node_size(const ClusterSpec& c);

// Every setting that differs between two scenarios, one "key: from -> to" line
// each (layout, batch, sharding, offload, recompute, method, precision, GPU).
[[nodiscard]] std::vector<std::string> diff_settings(const Scenario& from, const Scenario& to);

// ---- the one GPU-count ladder
// GPU counts worth trying between lo and hi: powers of two below a node, then
// whole nodes, coarser as they grow (1-7 nodes one by one, then steps of 4, 16,
// 64 and 256 nodes).
[[nodiscard]] std::vector<int> gpu_ladder(int gpus_per_node, int lo, int hi);

}  // namespace trainplan
