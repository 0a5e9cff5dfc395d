#!/usr/bin/env python3
"""Reference logits of the checkpoints make_quant_checkpoints.py wrote. Each quantised weight is
dequantised from the stored tensors by the format's public definition, in float32
(fp8_block: q * weight_scale_inv of its 128x128 block; nvfp4: (e2m1(code) * weight_scale) *
weight_scale_2), then the llama model runs on those weights:
  default  transformers' LlamaForCausalLM, float32, eager attention, CPU (needs torch; the GPU
           machine has it);
  --numpy  llama_numpy_reference.forward (float64 numpy), which first checks itself against
           the llama fixture's own transformers reference (within 1e-5 of each row's max).
Writes <root>/llama-<form>/reference.json and reference.bin like the fixture's own
(prefill_logits [24][V], greedy_step_logits [24][V]: full recompute per step).

  python3 make_quant_references.py CKPT_ROOT [--numpy FIXTURE_LLAMA_DIR]
"""
import hashlib, json, os, sys
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_numpy_reference as npref  # noqa: E402
from make_quant_checkpoints import E4M3  # noqa: E402
from llama_numpy_reference import read_safetensors  # noqa: E402

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)
PROMPT = [51, 501, 410, 84, 72, 343, 340, 320, 86, 77, 353, 78, 87, 996, 84, 558, 82, 522, 570, 620, 220, 290, 89, 88]


def f32(dtype, raw):
    if dtype == "F32": return raw.view(np.float32)
    if dtype == "BF16": return npref.bf16(raw)
    if dtype == "F8_E4M3": return E4M3[raw].astype(np.float32)
    raise ValueError(dtype)


def dequant(form, st):
    W = {}
    for name, (dtype, shape, raw) in st.items():
        if not name.endswith(".weight"): continue
        p = name[: -len("weight")]
        if form == "fp8_block" and p + "weight_scale_inv" in st:
            q = f32(dtype, raw).reshape(shape)
            sd, ss, sr = st[p + "weight_scale_inv"]
            s = f32(sd, sr).reshape(ss)
            full = np.repeat(np.repeat(s, 128, 0)[: shape[0]], 128, 1)[:, : shape[1]]
            W[name] = (q * full).astype(np.float32)
        elif form == "nvfp4" and p + "weight_scale_2" in st:
            codes = np.stack((raw & 15, raw >> 4), -1).reshape(shape[0], -1)
            vals = E2M1[codes & 7] * np.where((codes & 8) != 0, np.float32(-1), np.float32(1))
            s8 = f32(*st[p + "weight_scale"][::2]).reshape(st[p + "weight_scale"][1])
            g = f32(st[p + "weight_scale_2"][0], st[p + "weight_scale_2"][2])[0]
            n, k = vals.shape
            W[name] = ((vals.reshape(n, k // 16, 16) * s8[..., None]).astype(np.float32) * g).astype(np.float32).reshape(n, k)
        else:
            W[name] = f32(dtype, raw).reshape(shape)
    return W


def run_numpy(cfg, W):
    W64 = {k: v.astype(np.float64) for k, v in W.items()}
    logits = npref.forward(cfg, W64, PROMPT)
    cur, steps, greedy = list(PROMPT), [], []
    for _ in range(len(PROMPT)):
        lg = npref.forward(cfg, W64, cur)[-1]
        steps.append(lg); nxt = int(np.argmax(lg)); greedy.append(nxt); cur.append(nxt)
    return logits.astype(np.float32), np.stack(steps).astype(np.float32), greedy


def run_torch(d, W):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    torch.set_num_threads(4)
    cfg = AutoConfig.from_pretrained(d)
    if "quantization_config" in cfg.__dict__: del cfg.__dict__["quantization_config"]
    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32, attn_implementation="eager")
    missing, _ = model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in W.items()}, strict=False)
    assert not [m for m in missing if "rotary" not in m], missing
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([PROMPT])).logits[0].float().numpy()
        cur, steps, greedy = torch.tensor([PROMPT]), [], []
        for _ in range(len(PROMPT)):
            lg = model(input_ids=cur).logits[0, -1].float()
            steps.append(lg.numpy()); nxt = int(torch.argmax(lg)); greedy.append(nxt)
            cur = torch.cat([cur, torch.tensor([[nxt]])], dim=1)
    return logits, np.stack(steps), greedy, "transformers %s, torch %s" % (__import__("transformers").__version__, torch.__version__)


def main():
    root = sys.argv[1]
    numpy_fixture = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--numpy" else None
    if numpy_fixture:
        check = npref.self_check(numpy_fixture)
    for form in ("fp8_block", "nvfp4"):
        d = os.path.join(root, "llama-" + form)
        st = read_safetensors(os.path.join(d, "model.safetensors"))
        W = dequant(form, st)
        cfg = json.load(open(os.path.join(d, "config.json")))
        if numpy_fixture:
            logits, steps, greedy = run_numpy(cfg, W)
            oracle = ("numpy float64 llama forward (llama_numpy_reference.py), within %.2g of the llama fixture's "
                      "transformers reference on its own weights" % check)
        else:
            logits, steps, greedy, oracle = run_torch(d, W)
        blob = logits.astype("<f4").tobytes() + steps.astype("<f4").tobytes()
        open(os.path.join(d, "reference.bin"), "wb").write(blob)
        R = {"model": "llama-" + form, "source": "the llama fixture quantised by make_quant_checkpoints.py", "oracle": oracle,
             "reference_compute": "each quantised weight dequantised in float32 from the stored tensors, then the model in "
                                  "float32 (transformers) or float64 (numpy); greedy steps recompute the whole sequence",
             "input_ids": PROMPT, "greedy_ids": greedy, "bin_file": "reference.bin",
             "bin_sha256": hashlib.sha256(blob).hexdigest(), "dtype": "float32 little-endian",
             "model_sha256": hashlib.sha256(open(os.path.join(d, "model.safetensors"), "rb").read()).hexdigest(),
             "arrays": [{"name": "prefill_logits", "offset_bytes": 0, "shape": list(logits.shape)},
                        {"name": "greedy_step_logits", "offset_bytes": int(logits.nbytes), "shape": list(steps.shape)}]}
        json.dump(R, open(os.path.join(d, "reference.json"), "w"), indent=1)
        print(form, "greedy", greedy, flush=True)


if __name__ == "__main__":
    main()
