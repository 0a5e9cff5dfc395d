#!/usr/bin/env python3
"""Quantised checkpoints of the llama fixture, laid out as the formats' public specifications
say (issue #40's oracle). numpy only; deterministic.

  python3 make_quant_checkpoints.py SRC_LLAMA_DIR OUTDIR

SRC_LLAMA_DIR: ../shared/fixtures/models/llama (bf16 safetensors). Writes OUTDIR/llama-<form>/
{config.json, generation_config.json, tokenizer.json, tokenizer_config.json, model.safetensors}:
  fp8_block  DeepSeek-V3 / Qwen3-FP8: every linear weight of the decoder layers as F8_E4M3
             (e4m3fn, round to nearest even) with `weight_scale_inv` F32 [ceil(N/128)][ceil(K/128)]
             = the 128x128 block's amax / 448 (1 for an all-zero block); dequantised weight =
             q * weight_scale_inv of its block; config quantization_config {quant_method fp8,
             weight_block_size [128, 128]}.
  nvfp4      NVIDIA ModelOpt NVFP4: `weight` U8 [N][K/2] (two e2m1 codes a byte, element 2i in the
             low nibble; code = sign bit 3 | index into {0, .5, 1, 1.5, 2, 3, 4, 6}),
             `weight_scale` F8_E4M3 [N][K/16] = e4m3(amax16 / 6 / weight_scale_2),
             `weight_scale_2` F32 [] = amax / (6 * 448), `input_scale` F32 [] (0.0125);
             dequantised weight = (e2m1(code) * weight_scale) * weight_scale_2; config
             quantization_config {quant_method modelopt, quant_algo NVFP4, group_size 16}.
The embeddings, the head and the norms stay bf16, as both publishers leave them.
make_quant_references.py (torch + transformers, on the GPU machine) computes the reference logits.
"""
import json, os, shutil, struct, sys
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_numpy_reference import bf16 as bf16_to_f32, read_safetensors  # noqa: E402

LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)


def e4m3_table():
    v = np.zeros(256, dtype=np.float64)
    for c in range(256):
        s, e, m = c >> 7, (c >> 3) & 15, c & 7
        mag = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        v[c] = -mag if s else mag
    v[0x7F] = v[0xFF] = np.nan
    return v


E4M3 = e4m3_table()
POS = np.array([E4M3[c] for c in range(0x7F)])  # codes 0..126, ascending magnitudes


def to_e4m3(x):
    """float32 -> e4m3fn codes, round to nearest, ties to the even code, saturating at 448."""
    x = np.asarray(x, dtype=np.float64)
    a = np.minimum(np.abs(x), 448.0)
    hi = np.clip(np.searchsorted(POS, a, side="left"), 0, 126)
    lo = np.clip(hi - 1, 0, 126)
    dlo, dhi = np.abs(a - POS[lo]), np.abs(POS[hi] - a)
    code = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    return (code | np.where((x < 0) & (code != 0), 0x80, 0)).astype(np.uint8)


def write_safetensors(path, tensors):
    hdr, off, blobs = {}, 0, []
    for k in sorted(tensors):
        dtype, shape, raw = tensors[k]
        raw = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
        hdr[k] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + raw.size]}
        off += raw.size
        blobs.append(raw.tobytes())
    hdr["__metadata__"] = {"format": "pt"}
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def fp8_block(w):
    n, k = w.shape
    bn, bk = (n + 127) // 128, (k + 127) // 128
    scale = np.ones((bn, bk), dtype=np.float32)
    q = np.zeros((n, k), dtype=np.uint8)
    for i in range(bn):
        for j in range(bk):
            blk = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
            amax = np.float32(np.abs(blk).max())
            s = np.float32(amax / np.float32(448.0)) if amax > 0 else np.float32(1.0)
            scale[i, j] = s
            q[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = to_e4m3((blk / s).astype(np.float32))
    return {"weight": ("F8_E4M3", [n, k], q), "weight_scale_inv": ("F32", [bn, bk], scale)}


def e2m1_codes(x):
    a = np.abs(x)
    i = np.select([a <= 0.25, a < 0.75, a <= 1.25, a < 1.75, a <= 2.5, a < 3.5, a <= 5.0], [0, 1, 2, 3, 4, 5, 6], 7)
    return (i | np.where((x < 0) & (i != 0), 8, 0)).astype(np.uint8)


def nvfp4(w):
    n, k = w.shape
    g = np.float32(np.abs(w).max() / np.float32(6.0 * 448.0))
    blocks = w.reshape(n, k // 16, 16)
    s8 = to_e4m3((np.abs(blocks).max(axis=-1) / np.float32(6.0) / g).astype(np.float32))
    sf = (E4M3[s8].astype(np.float32) * g).astype(np.float32)
    safe = np.where(sf == 0, np.float32(1.0), sf)
    codes = np.where(sf[..., None] == 0, 0, e2m1_codes((blocks / safe[..., None]).astype(np.float32))).reshape(n, k).astype(np.uint8)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return {"weight": ("U8", [n, k // 2], packed), "weight_scale": ("F8_E4M3", [n, k // 16], s8),
            "weight_scale_2": ("F32", [], np.array([g], dtype=np.float32)),
            "input_scale": ("F32", [], np.array([0.0125], dtype=np.float32))}


def main(src, out_root):
    st = read_safetensors(os.path.join(src, "model.safetensors"))
    for form, fn in (("fp8_block", fp8_block), ("nvfp4", nvfp4)):
        out = os.path.join(out_root, "llama-" + form)
        os.makedirs(out, exist_ok=True)
        for f in ("generation_config.json", "tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(src, f), os.path.join(out, f))
        tensors = {}
        for name, (dtype, shape, raw) in st.items():
            leaf = name.rsplit(".", 2)
            if name.endswith(".weight") and len(leaf) == 3 and leaf[1] in LINEAR:
                assert dtype == "BF16"
                w = bf16_to_f32(raw).reshape(shape)
                prefix = name[: -len("weight")]
                for k, v in fn(w).items(): tensors[prefix + k] = v
            else:
                tensors[name] = (dtype, shape, raw)
        write_safetensors(os.path.join(out, "model.safetensors"), tensors)
        cfg = json.load(open(os.path.join(src, "config.json")))
        if form == "fp8_block":
            cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                          "weight_block_size": [128, 128]}
        else:
            cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                                          "exclude_modules": ["lm_head"]}
        json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
        print(form, os.path.getsize(os.path.join(out, "model.safetensors")), "bytes")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
