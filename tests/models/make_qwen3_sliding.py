#!/usr/bin/env python3
"""Makes tests/models/qwen3-sliding: the ../shared/fixtures qwen3 model (its weights, unchanged)
with a sliding window on layer 0 (window 8; layer 1 keeps full attention), and transformers'
float32 logits for every position of a 48-token input (the fixture's 24 prompt ids + its 24 greedy
ids), so the window drops positions many times over. Only config.json, reference.json and
reference.bin are written: the engine tests assemble the model from the fixture's weights and
tokenizer (tests/engine/sliding_window_test.cpp).

The reference runs on the CPU in float32 on the fixture's bf16 weights (an exact upcast),
attn_implementation='eager', as ../shared/fixtures' references are made. Sanity checks recorded in
reference.json: the first 8 positions equal the full-attention model's logits bitwise (the window
covers them), later ones differ (the window has an effect).

    python3 tests/models/make_qwen3_sliding.py --fixture ../shared/fixtures/models/qwen3 --out tests/models/qwen3-sliding

Needs torch and transformers (the H200 image has them: transformers 5.17).
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile

WINDOW = 8
LAYER_TYPES = ["sliding_attention", "full_attention"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import numpy as np
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(4)
    ref = json.load(open(os.path.join(a.fixture, "reference.json")))
    ids = ref["input_ids"] + ref["greedy_ids"]
    config = json.load(open(os.path.join(a.fixture, "config.json")))
    config.update({"use_sliding_window": True, "sliding_window": WINDOW, "layer_types": LAYER_TYPES})

    def logits_of(cfg: dict):
        with tempfile.TemporaryDirectory() as d:
            for f in ("model.safetensors", "generation_config.json"):
                shutil.copy(os.path.join(a.fixture, f), d)
            json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)
            m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
            assert next(m.parameters()).dtype == torch.float32
            got = [m.config.layer_types, m.config.sliding_window]
            with torch.no_grad():
                return m(input_ids=torch.tensor([ids], dtype=torch.long)).logits[0].float().numpy(), got

    logits, seen = logits_of(config)
    full, _ = logits_of(json.load(open(os.path.join(a.fixture, "config.json"))))
    assert seen == [LAYER_TYPES, WINDOW], seen
    same_within_window = bool((logits[:WINDOW] == full[:WINDOW]).all())
    differs_after = float(np.abs(logits[WINDOW:] - full[WINDOW:]).max())
    assert same_within_window and differs_after > 1e-3, (same_within_window, differs_after)

    os.makedirs(a.out, exist_ok=True)
    json.dump(config, open(os.path.join(a.out, "config.json"), "w"), indent=2)
    blob = logits.astype("<f4").tobytes()
    open(os.path.join(a.out, "reference.bin"), "wb").write(blob)
    json.dump({
        "model": "qwen3 fixture with a sliding window on layer 0",
        "weights": "../shared/fixtures/models/qwen3/model.safetensors (sha256 %s)" %
                   hashlib.sha256(open(os.path.join(a.fixture, "model.safetensors"), "rb").read()).hexdigest(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "numpy": np.__version__,
                     "python": sys.version.split()[0]},
        "reference_compute": "CPU, float32, attn_implementation=eager, batch 1, no padding, positions 0..n-1",
        "sliding_window": WINDOW, "layer_types": LAYER_TYPES,
        "input_ids": ids,
        "bin_file": "reference.bin", "bin_sha256": hashlib.sha256(blob).hexdigest(), "dtype": "float32 little-endian",
        "arrays": [{"name": "logits", "offset_bytes": 0, "shape": list(logits.shape),
                    "order": "row-major [position][vocab]; row i = logits after input_ids[0..i]"}],
        "checks": {"first_window_rows_equal_full_attention": same_within_window,
                   "max_abs_diff_vs_full_attention_after_window": differs_after},
    }, open(os.path.join(a.out, "reference.json"), "w"), indent=1)
    print("wrote", a.out, "rows", logits.shape[0], "max diff vs full attention after the window", differs_after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
