#!/usr/bin/env python3
"""Makes tests/models/qwen3-embedding-tiny: a random-weight embedding checkpoint laid out as
Qwen/Qwen3-Embedding-* are (a bare Qwen3Model saved by transformers: tensors without the "model."
prefix and no lm_head, config.json naming Qwen3ForCausalLM with tied embeddings as the real
0.6B's does, sentence-transformers' modules.json with 1_Pooling = last token and 2_Normalize, the
tokenizer appending <|endoftext|> to every input), plus reference.json: transformers' embeddings of
a few inputs as sentence-transformers computes them (last_hidden_state at the last token, which is
the appended <|endoftext|>, then L2-normalised; and with `dimensions` = 64, Matryoshka truncation
then normalisation). The reference runs on the CPU in float32 on the saved bf16 weights reloaded
(an exact upcast), attn_implementation='eager', as ../shared/fixtures' references are made.

    python3 tests/models/make_qwen3_embedding.py --tokenizer TINY_BPE_DIR --out tests/models/qwen3-embedding-tiny

TINY_BPE_DIR: ../shared/fixtures/tokenizer/tiny-bpe-1024 (the byte-level BPE of the fixtures).
Needs torch, transformers and tokenizers (the H200 image has them: transformers 5.17).
"""
import argparse
import json
import os
import shutil
import sys

TEXTS = [
    "The weather is lovely today.",
    "It's so sunny outside!",
    "He drove to the stadium.",
    "a",
    "Embeddings turn text into vectors; similar texts land close together.",
]
QUERY_PROMPT = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    import torch
    import transformers
    from tokenizers import Tokenizer
    from tokenizers.processors import TemplateProcessing
    from transformers import Qwen3Config, Qwen3Model

    os.makedirs(a.out, exist_ok=True)
    tok = Tokenizer.from_file(os.path.join(a.tokenizer, "tokenizer.json"))
    eos = "<|endoftext|>"
    eos_id = tok.token_to_id(eos)
    tok.post_processor = TemplateProcessing(single=f"$A:0 {eos}:0", pair=f"$A:0 {eos}:0 $B:1 {eos}:1",
                                            special_tokens=[(eos, eos_id)])
    tok.save(os.path.join(a.out, "tokenizer.json"))
    with open(os.path.join(a.tokenizer, "tokenizer_config.json")) as f:
        tc = json.load(f)
    tc["padding_side"] = "left"
    with open(os.path.join(a.out, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2)

    config = Qwen3Config(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=64, rms_norm_eps=1e-6,
                         rope_theta=1e6, max_position_embeddings=4096, tie_word_embeddings=True,
                         eos_token_id=eos_id, pad_token_id=eos_id, bos_token_id=None)
    torch.manual_seed(a.seed)
    model = Qwen3Model(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name:
                p += 0.1 * torch.randn_like(p)
    model = model.to(torch.bfloat16)
    model.save_pretrained(a.out, safe_serialization=True)
    # The real checkpoints' config names the causal LM (their weights are the bare model's).
    with open(os.path.join(a.out, "config.json")) as f:
        cfg = json.load(f)
    cfg["architectures"] = ["Qwen3ForCausalLM"]
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    # sentence-transformers' description of the pipeline.
    with open(os.path.join(a.out, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                   {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
                  f, indent=2)
    os.makedirs(os.path.join(a.out, "1_Pooling"), exist_ok=True)
    with open(os.path.join(a.out, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": 256, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
                   "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
                   "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": True, "include_prompt": True},
                  f, indent=2)
    os.makedirs(os.path.join(a.out, "2_Normalize"), exist_ok=True)
    with open(os.path.join(a.out, "2_Normalize", "config.json"), "w") as f:
        json.dump({}, f)
    with open(os.path.join(a.out, "config_sentence_transformers.json"), "w") as f:
        json.dump({"prompts": {"query": QUERY_PROMPT, "document": ""}, "default_prompt_name": None,
                   "similarity_fn_name": "cosine"}, f, indent=2)

    ref_model = Qwen3Model.from_pretrained(a.out, dtype=torch.float32, attn_implementation="eager").eval()
    inputs = [{"text": t} for t in TEXTS] + [{"text": QUERY_PROMPT + TEXTS[2], "note": "query prompt + text"}]
    cases = []
    with torch.no_grad():
        for item in inputs:
            ids = tok.encode(item["text"]).ids
            h = ref_model(input_ids=torch.tensor([ids])).last_hidden_state[0, -1].double()
            full = (h / h.norm()).tolist()
            h64 = h[:64]
            cases.append({**item, "input_ids": ids, "embedding": full, "embedding_64": (h64 / h64.norm()).tolist(),
                          "last_hidden_norm": float(h.norm())})
    ref = {"made_by": f"tests/models/make_qwen3_embedding.py, torch {torch.__version__}, "
                      f"transformers {transformers.__version__}, float32 CPU eager, seed {a.seed}",
           "pooling": "last token (the appended <|endoftext|>), then L2 normalisation; embedding_64: the first 64 "
                      "dimensions of the last hidden state, then L2 normalisation",
           "cases": cases}
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump(ref, f)
    with open(os.path.join(a.out, "README.md"), "w") as f:
        f.write("# qwen3-embedding-tiny: a random-weight embedding test model\n\n"
                "Laid out as Qwen/Qwen3-Embedding-* checkpoints are (bare Qwen3Model tensors, tied embeddings,\n"
                "sentence-transformers last-token pooling + normalisation, a tokenizer that appends\n"
                "`<|endoftext|>`). Made by `tests/models/make_qwen3_embedding.py` on the H200 image\n"
                f"({ref['made_by']}); `reference.json` holds transformers' embeddings of its inputs.\n"
                "Random weights: the vectors mean nothing, only their agreement with transformers counts.\n")
    shutil.rmtree(os.path.join(a.out, "__pycache__"), ignore_errors=True)
    print(f"wrote {a.out}: {sorted(os.listdir(a.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
