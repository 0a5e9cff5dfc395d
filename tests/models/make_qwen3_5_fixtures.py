#!/usr/bin/env python3
"""Tiny random Qwen3.5 hybrid fixtures (dense qwen3_5_text and qwen3_5_moe_text), made the way
../shared/fixtures/tools/make_fixtures.py made the others: transformers' own init (seed 1234),
every 1-D norm weight += 0.1 N(0,1), cast to bf16 and saved; the reference = the saved weights
reloaded as float32 on the CPU (eager attention): prefill logits at 24 positions and 24 greedy
steps (full recompute each step), in reference.json + reference.bin (the shared fixtures'
format, tests/support/fixture_engine.hpp reads it).

Run on the GPU machine (it has torch and transformers 5.17; this machine has neither):
  python3 tests/models/make_qwen3_5_fixtures.py <tiny tokenizer dir> <out dir>
with the tokenizer dir ../shared/fixtures/tokenizer/tiny-bpe-1024 carried. The models are
small enough to commit (tests/models/qwen3_5/<name>/).

MTP: transformers 5.17 drops the checkpoints' mtp.* weights on load, so these fixtures have no
MTP head; tests/models/make_qwen3_5_mtp_fixture.py adds one to qwen3_5-tiny with an explicit
reference (qwen3_5-mtp-tiny).
"""
import glob, hashlib, json, os, sys, time
import numpy as np
import torch
import transformers

TOK, OUT = sys.argv[1], sys.argv[2]
torch.use_deterministic_algorithms(True, warn_only=True)
torch.set_num_threads(4)
SEED, N_PROMPT, N_GEN = 1234, 24, 24
TEXT = ("The quick brown fox jumps over the lazy dog. In 2026 the engine decoded 24 tokens, "
        "then 24 more, greedily; llama.cpp agreed to 1e-3!")
LAYERS = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]
COMMON = dict(vocab_size=1024, hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
              head_dim=64, intermediate_size=256, rms_norm_eps=1e-6, max_position_embeddings=4096,
              tie_word_embeddings=False, bos_token_id=None, eos_token_id=1023, pad_token_id=1021,
              layer_types=LAYERS, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
              linear_value_head_dim=32, linear_conv_kernel_dim=4,
              rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                               "mrope_section": [2, 3, 3], "mrope_interleaved": True})
SPECS = {
    "qwen3_5": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM", {}),
    "qwen3_5_moe": ("Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM",
                    dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=64)),
}


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def sha(b):
    return hashlib.sha256(b).hexdigest()


tok = __import__("tokenizers").Tokenizer.from_file(os.path.join(TOK, "tokenizer.json"))
PROMPT = tok.encode(TEXT).ids[:N_PROMPT]
summary = {}
for name, (cfg_name, model_name, extra) in SPECS.items():
    if not hasattr(transformers, cfg_name) or not hasattr(transformers, model_name):
        summary[name] = "SKIPPED: transformers %s lacks %s / %s" % (transformers.__version__, cfg_name, model_name)
        log(name, summary[name])
        continue
    kw = dict(COMMON)
    kw.update(extra)
    cfg = getattr(transformers, cfg_name)(**kw)
    cfg.architectures = [model_name]
    M = getattr(transformers, model_name)
    torch.manual_seed(SEED)
    model = M(cfg).float().eval()
    g = torch.Generator().manual_seed(SEED + 1)
    perturbed = []
    with torch.no_grad():
        for pn, p in model.named_parameters():
            if p.ndim == 1 and "norm" in pn.lower():
                p.add_(0.1 * torch.randn(p.shape, generator=g))
                perturbed.append(pn)
    mdir = os.path.join(OUT, name)
    os.makedirs(mdir, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(mdir)
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        open(os.path.join(mdir, fn), "wb").write(open(os.path.join(TOK, fn), "rb").read())
    del model
    ref = M.from_pretrained(mdir, dtype=torch.float32, attn_implementation="eager").eval()
    ids = torch.tensor([PROMPT], dtype=torch.long)
    with torch.no_grad():
        logits = ref(input_ids=ids).logits[0].float().numpy()
        cur, steps, greedy = ids, [], []
        for _ in range(N_GEN):
            lg = ref(input_ids=cur).logits[0, -1].float()
            steps.append(lg.numpy())
            nxt = int(torch.argmax(lg))
            greedy.append(nxt)
            cur = torch.cat([cur, torch.tensor([[nxt]])], dim=1)
    steps = np.stack(steps).astype(np.float32)
    blob = logits.astype("<f4").tobytes() + steps.astype("<f4").tobytes()
    open(os.path.join(mdir, "reference.bin"), "wb").write(blob)
    V = logits.shape[1]
    srt = np.sort(logits, -1)
    R = {
        "model": name, "architecture": model_name, "config_class": cfg_name, "seed": SEED,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "init": "transformers default init after torch.manual_seed(%d); every 1-D parameter whose name contains 'norm' "
                "+= 0.1*randn (seed %d); cast to bfloat16 and saved; reference = the saved weights reloaded as float32"
                % (SEED, SEED + 1),
        "perturbed_norm_params": perturbed,
        "reference_compute": "CPU, float32, attn_implementation=eager, batch 1, positions 0..n-1",
        "input_ids": PROMPT, "greedy_ids": greedy,
        "bin_file": "reference.bin", "bin_sha256": sha(blob), "dtype": "float32 little-endian",
        "arrays": [
            {"name": "prefill_logits", "offset_bytes": 0, "shape": [N_PROMPT, V]},
            {"name": "greedy_step_logits", "offset_bytes": logits.nbytes, "shape": [N_GEN, V]}],
        "stats": {"prefill_top1_margin_min": float(np.min(srt[:, -1] - srt[:, -2]))},
        "config": json.load(open(os.path.join(mdir, "config.json"))),
    }
    json.dump(R, open(os.path.join(mdir, "reference.json"), "w"), indent=1)
    summary[name] = {"ok": True, "greedy": greedy, "tensors": sorted(
        k for f in glob.glob(os.path.join(mdir, "*.safetensors"))
        for k in __import__("safetensors").safe_open(f, "pt").keys())}
    log(name, "ok", summary[name]["greedy"])
json.dump(summary, open(os.path.join(OUT, "summary.json"), "w"), indent=1)
log("done")
