#!/usr/bin/env python3
"""A float64 numpy forward of transformers' LlamaForCausalLM (default RoPE, no scaling), an
oracle independent of memra for machines without torch: make_quant_references.py --numpy.
It checks itself first: on the llama fixture (bf16 weights upcast exactly) its logits must
equal the fixture's transformers reference within 1e-5 of each row's max |logit|.
"""
import json, os, struct
import numpy as np


def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__": continue
        s, e = v["data_offsets"]
        out[k] = (v["dtype"], v["shape"], np.frombuffer(b[8 + n + s:8 + n + e], dtype=np.uint8))
    return out


def bf16(raw):
    return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def forward(cfg, W, ids):
    """Logits [len(ids)][vocab] of one causal pass; W: name -> float64 array."""
    h, nh, nkv, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    theta = cfg.get("rope_parameters", {}).get("rope_theta", cfg.get("rope_theta", 10000.0))
    eps = cfg["rms_norm_eps"]
    T = len(ids)
    x = W["model.embed_tokens.weight"][ids]
    inv = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))

    def rope(q):  # [heads][T][hd], rotate_half
        q1, q2 = q[..., : hd // 2], q[..., hd // 2:]
        return q * cos + np.concatenate([-q2, q1], -1) * sin

    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        a = rms(x, W[p + "input_layernorm.weight"], eps)
        q = (a @ W[p + "self_attn.q_proj.weight"].T).reshape(T, nh, hd).transpose(1, 0, 2)
        k = (a @ W[p + "self_attn.k_proj.weight"].T).reshape(T, nkv, hd).transpose(1, 0, 2)
        v = (a @ W[p + "self_attn.v_proj.weight"].T).reshape(T, nkv, hd).transpose(1, 0, 2)
        q, k = rope(q), rope(k)
        k, v = np.repeat(k, nh // nkv, 0), np.repeat(v, nh // nkv, 0)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = (s @ v).transpose(1, 0, 2).reshape(T, nh * hd)
        x = x + o @ W[p + "self_attn.o_proj.weight"].T
        a = rms(x, W[p + "post_attention_layernorm.weight"], eps)
        g = a @ W[p + "mlp.gate_proj.weight"].T
        u = a @ W[p + "mlp.up_proj.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * u) @ W[p + "mlp.down_proj.weight"].T
    x = rms(x, W["model.norm.weight"], eps)
    return x @ W["lm_head.weight"].T


def self_check(fixture_dir):
    cfg = json.load(open(os.path.join(fixture_dir, "config.json")))
    st = read_safetensors(os.path.join(fixture_dir, "model.safetensors"))
    W = {k: bf16(raw).reshape(shape).astype(np.float64) for k, (dt, shape, raw) in st.items()}
    ref = json.load(open(os.path.join(fixture_dir, "reference.json")))
    ids = ref["input_ids"]
    want = np.fromfile(os.path.join(fixture_dir, "reference.bin"), dtype="<f4", count=len(ids) * cfg["vocab_size"]).reshape(len(ids), -1)
    got = forward(cfg, W, ids)
    worst = float((np.abs(got - want).max(-1) / np.abs(want).max(-1)).max())
    assert worst < 1e-5, "numpy llama differs from the transformers reference by %g" % worst
    return worst
