#!/usr/bin/env python3
"""llama.cpp's error on each GGUF of a fixture against the fixture's transformers float32
reference: the budget memra's GGUF tests hold memra to (tests/engine/fixture_model_test.cpp,
EngineGguf). Reads MODEL_DIR/reference.{json,bin} and every GGUF_DIR/*.dump.json that
llamacpp_logits wrote; writes GGUF_DIR/llamacpp_vs_hf.json:
  {"<file>.ngl<N>": {"prefill_vs_hf": {"rmse", "max_abs_diff", "ref_rms", "min_cosine",
   "top1_agree", "rows"}, "greedy_ids": [...], "greedy_prefix_match_with_hf": m}}
usage: compare_to_reference.py MODEL_DIR GGUF_DIR (needs numpy)"""
import glob, json, os, sys
import numpy as np

mdir, gdir = sys.argv[1], sys.argv[2]
ref_meta = json.load(open(os.path.join(mdir, "reference.json")))
n, vocab = len(ref_meta["input_ids"]), ref_meta["arrays"][0]["shape"][1]
ref = np.fromfile(os.path.join(mdir, "reference.bin"), dtype="<f4")[: n * vocab].reshape(n, vocab)


def metrics(x, y):
    d = x - y
    cos = (x * y).sum(-1) / (np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1))
    return {"rmse": float(np.sqrt((d ** 2).mean())), "max_abs_diff": float(np.abs(d).max()),
            "ref_rms": float(np.sqrt((y ** 2).mean())), "min_cosine": float(cos.min()),
            "top1_agree": int((x.argmax(-1) == y.argmax(-1)).sum()), "rows": int(x.shape[0])}


out = {}
for meta in sorted(glob.glob(os.path.join(gdir, "*.dump.json"))):
    d = json.load(open(meta))
    x = np.fromfile(os.path.join(gdir, d["logits_file"]), dtype="<f4").reshape(d["n_tokens"], d["n_vocab"])
    m = 0
    while m < min(len(d["greedy"]), len(ref_meta["greedy_ids"])) and d["greedy"][m] == ref_meta["greedy_ids"][m]:
        m += 1
    out[os.path.basename(meta)[: -len(".dump.json")]] = {
        "prefill_vs_hf": metrics(x, ref), "greedy_ids": d["greedy"], "greedy_prefix_match_with_hf": m}
json.dump(out, open(os.path.join(gdir, "llamacpp_vs_hf.json"), "w"), indent=1)
for k, v in out.items():
    print(k, v["prefill_vs_hf"], "greedy prefix match", v["greedy_prefix_match_with_hf"])
