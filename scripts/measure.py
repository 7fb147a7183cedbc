#!/usr/bin/env python3
"""Measure a few training steps on whatever device is present and write a run
file for `trainplan calibrate` (issue 13).

The model is a Llama-style decoder (RMSNorm, grouped-query attention through
torch's scaled_dot_product_attention, or eager attention before PyTorch 2.0,
SwiGLU MLP, untied LM head) built in plain
PyTorch from a Hugging Face config.json (hidden_size, num_hidden_layers,
num_attention_heads, num_key_value_heads, intermediate_size, vocab_size) or from
the built-in tiny config. It trains on random tokens with AdamW for --steps
steps; the step time is the median after --warmup steps (the same rule the log
parsers use). On CUDA the peak allocated / reserved memory
(torch.cuda.max_memory_allocated / max_memory_reserved) are recorded too.

The run file holds the scenario (the model inline, the GPU preset you name with
--gpu, the batch) and [measured]; calibrate it with
    trainplan calibrate run.toml -o my-cluster.toml

Exit 0 on success; 77 (skipped) when PyTorch is not installed.
"""
import argparse
import json
import statistics
import sys
import time

TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 176, "vocab_size": 512}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", help="Hugging Face config.json of a Llama-style model (default: a tiny one)")
    ap.add_argument("--gpu", default="a100-sxm-80gb", help="trainplan GPU preset of this machine's GPU")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--micro-batch", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "bf16-mixed"], default=None,
                    help="default: bf16-mixed on CUDA, fp32 on the CPU")
    ap.add_argument("--device", default=None, help="cuda | cpu (default: cuda when present)")
    ap.add_argument("-o", "--output", default="run.toml")
    args = ap.parse_args()
    if args.steps <= args.warmup:
        ap.error("--steps must exceed --warmup")

    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("measure.py: skipped: PyTorch is not installed (Debian: apt install python3-torch)", file=sys.stderr)
        return 77

    cfg = dict(TINY)
    if args.config:
        with open(args.config) as f:
            cfg.update({k: v for k, v in json.load(f).items() if k in TINY})
    h, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    nh, nkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    ffn, V = cfg["intermediate_size"], cfg["vocab_size"]
    hd = h // nh
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    precision = args.precision or ("bf16-mixed" if device == "cuda" else "fp32")

    class RMSNorm(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.w

    def rope(x):
        # Rotary position embedding over the head dimension (Su et al. 2021).
        s = x.shape[-2]
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=x.device, dtype=torch.float32) / hd))
        ang = torch.outer(torch.arange(s, device=x.device, dtype=torch.float32), inv)
        cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)

    sdpa = getattr(F, "scaled_dot_product_attention", None)  # PyTorch >= 2.0 (fused kernels)

    def attention(q, k, v):
        if sdpa is not None:
            return sdpa(q, k, v, is_causal=True)
        # Eager attention (PyTorch 1.x): the s x s scores are materialised.
        s = q.shape[-2]
        scores = (q @ k.transpose(-2, -1)) / hd ** 0.5
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        return scores.masked_fill(mask, float("-inf")).softmax(-1) @ v

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = RMSNorm(h), RMSNorm(h)
            self.q = torch.nn.Linear(h, nh * hd, bias=False)
            self.kv = torch.nn.Linear(h, 2 * nkv * hd, bias=False)
            self.o = torch.nn.Linear(nh * hd, h, bias=False)
            self.gate_up = torch.nn.Linear(h, 2 * ffn, bias=False)
            self.down = torch.nn.Linear(ffn, h, bias=False)

        def forward(self, x):
            b, s, _ = x.shape
            y = self.n1(x)
            q = self.q(y).view(b, s, nh, hd).transpose(1, 2)
            k, v = self.kv(y).view(b, s, 2, nkv, hd).unbind(2)
            k, v = k.transpose(1, 2), v.transpose(1, 2)
            k, v = k.repeat_interleave(nh // nkv, 1), v.repeat_interleave(nh // nkv, 1)
            a = attention(rope(q), rope(k), v)
            x = x + self.o(a.transpose(1, 2).reshape(b, s, nh * hd))
            g, u = self.gate_up(self.n2(x)).chunk(2, -1)
            return x + self.down(F.silu(g) * u)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, h)
            self.layers = torch.nn.ModuleList(Layer() for _ in range(L))
            self.norm = RMSNorm(h)
            self.head = torch.nn.Linear(h, V, bias=False)

        def forward(self, ids):
            x = self.emb(ids)
            for layer in self.layers:
                x = layer(x)
            return self.head(self.norm(x))

    torch.manual_seed(0)
    model = Model().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, V, (args.micro_batch, args.seq_len + 1), device=device)
    use_amp = precision == "bf16-mixed"
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    times = []
    for _ in range(args.steps):
        sync()
        t0 = time.perf_counter()
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=use_amp):
            logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, V), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        times.append(time.perf_counter() - t0)
    step_s = statistics.median(times[args.warmup:])

    gpu_name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    lines = [
        f"# Written by scripts/measure.py: {args.steps} steps on {gpu_name} (PyTorch {torch.__version__}),",
        f"# median step time after {args.warmup} warm-up steps. Calibrate with: trainplan calibrate {args.output}",
        "[model]",
        'name = "measure.py llama-style"',
        f"num_layers = {L}", f"hidden_size = {h}", f"num_heads = {nh}", f"num_kv_heads = {nkv}",
        f"ffn_hidden_size = {ffn}", f"vocab_size = {V}", f"max_seq_len = {args.seq_len}",
        'activation = "swiglu"', 'norm = "rmsnorm"', 'position = "rope"', "tied_embeddings = false",
        "",
        "[hardware]", f'gpu = "{args.gpu}"', "gpus = 1", "gpus_per_node = 1",
        "",
        "[training]", 'method = "full"', f'precision = "{precision}"', 'optimizer = "adamw"',
        'framework = "pytorch-amp"' if use_amp else 'framework = "deepspeed"',
        "zero = 0", 'recompute = "none"', f"flash_attention = {'true' if sdpa is not None else 'false'}",
        f"seq_len = {args.seq_len}", f"micro_batch = {args.micro_batch}", f"global_batch = {args.micro_batch}",
        "",
        "[measured]", f'name = "measure.py on {gpu_name}"', f"step_time_s = {step_s!r}",
    ]
    if device == "cuda":
        lines.append(f"peak_allocated_gib = {torch.cuda.max_memory_allocated() / 2**30!r}")
        lines.append(f"peak_reserved_gib = {torch.cuda.max_memory_reserved() / 2**30!r}")
    with open(args.output, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"measure.py: {args.steps} steps on {gpu_name}: median step {step_s * 1e3:.2f} ms -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
