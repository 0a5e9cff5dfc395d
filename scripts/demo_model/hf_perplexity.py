#!/usr/bin/env python3
"""transformers' sliding-window perplexity, computed exactly as memra-perplexity computes it.

    scripts/demo_model/hf_perplexity.py MODEL_DIR FILE [--ctx 512] [--stride CTX/2] [--chunks N]
                                        [--dtype float32|bfloat16] [--json OUT.json]

The method (docs/FLAGS.md, memra-perplexity; llama.cpp's llama-perplexity with --ppl-stride):
the file is tokenized whole with the model's tokenizer.json (no special tokens added); windows of
CTX tokens start at 0, STRIDE, 2*STRIDE, ... while they fit in the file (at most N with --chunks);
each window is one forward pass from position 0 and scores its last STRIDE tokens, each predicted
by the logits of the position before it, so every scored token sees at least CTX-STRIDE tokens of
context and each token is scored at most once. PPL = exp(mean NLL); the uncertainty is
PPL * sqrt((mean(NLL^2) - mean(NLL)^2) / (n - 1)), as llama.cpp prints it.

--dtype float32 (default): the checkpoint's weights upcast exactly to float32 and float32 compute
with TF32 off, eager attention (the reference for memra's bf16 model); bfloat16: bf16 compute.
Runs on the GPU when there is one. Needs torch, transformers and tokenizers.
"""
import argparse
import json
import math
import sys


def windows(n_tokens: int, ctx: int, stride: int, chunks: int = 0) -> list:
    if not 1 <= stride < ctx:
        raise ValueError(f"stride {stride} must be at least 1 and below ctx {ctx}")
    if n_tokens < ctx:
        raise ValueError(f"{n_tokens} tokens are fewer than one context of {ctx}")
    k = (n_tokens - ctx) // stride + 1
    if chunks > 0:
        k = min(k, chunks)
    return [i * stride for i in range(k)]


def perplexity(model, ids: list, ctx: int, stride: int, chunks: int = 0, batch: int = 8, device: str = "cpu") -> dict:
    import torch
    starts = windows(len(ids), ctx, stride, chunks)
    tokens = torch.tensor(ids, dtype=torch.long)
    nll = []
    with torch.no_grad():
        for b in range(0, len(starts), batch):
            x = torch.stack([tokens[s:s + ctx] for s in starts[b:b + batch]]).to(device)
            logits = model(input_ids=x, use_cache=False).logits.double()
            logp = torch.log_softmax(logits[:, ctx - stride - 1:ctx - 1], dim=-1)
            target = x[:, ctx - stride:ctx]
            nll.extend((-logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)).flatten().cpu().tolist())
    n = len(nll)
    mean = sum(nll) / n
    var = sum(v * v for v in nll) / n - mean * mean
    ppl = math.exp(mean)
    return {"ctx": ctx, "stride": stride, "chunks": chunks, "tokens": len(ids), "windows": len(starts), "scored": n,
            "nll_mean": mean, "ppl": ppl, "ppl_err": ppl * math.sqrt(max(var, 0.0) / (n - 1)) if n > 1 else 0.0}


def load(model_dir: str, dtype_name: str):
    import torch
    from transformers import AutoModelForCausalLM
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype_name]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="eager").to(device).eval()
    return model, device


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("file")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--stride", type=int, default=0, help="default ctx/2")
    ap.add_argument("--chunks", type=int, default=0, help="at most N windows (default all)")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    from tokenizers import Tokenizer
    text = open(args.file, "rb").read().decode("utf-8")
    ids = Tokenizer.from_file(f"{args.model_dir}/tokenizer.json").encode(text, add_special_tokens=False).ids
    model, device = load(args.model_dir, args.dtype)
    r = perplexity(model, ids, args.ctx, args.stride or args.ctx // 2, args.chunks, device=device)
    r["dtype"] = args.dtype
    print(f"transformers: {r['tokens']} tokens, {r['windows']} windows of {r['ctx']} (stride {r['stride']}), "
          f"{r['scored']} scored: PPL = {r['ppl']:.4f} +/- {r['ppl_err']:.4f}")
    if args.json:
        json.dump(r, open(args.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
