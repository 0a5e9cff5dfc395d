#!/usr/bin/env python3
"""The qwen3_5-mtp-tiny fixture (#39): tests/models/qwen3_5-tiny with an MTP layer added, and an
explicit float32 reference of the model and of its MTP head, in numpy.

Why numpy and not transformers: transformers 5.17 drops a checkpoint's mtp.* weights on load, so
the MTP head's reference has to be written out anyway. The target model's part of this reference
(which produces the hidden states the head reads) is checked here against transformers' own logits
in tests/models/qwen3_5-tiny/reference.bin (made by make_qwen3_5_fixtures.py on the GPU machine):
the script stops if they differ by more than 1e-4. The MTP layer is the one the Qwen3.5/3.6
checkpoints ship and vLLM and llama.cpp run (vLLM qwen3_next_mtp, llama.cpp src/models/qwen35.cpp
graph_mtp):
    m_i = shared_norm(layer(fc([pre_fc_norm_embedding(embed(x_{i+1})), pre_fc_norm_hidden(h_i)])))
    logits = lm_head(m_i)     (the model's own lm_head and embedding)
where h_i is the target's final hidden state at position i (after model.norm), the layer is a gated
full-attention decoder layer with its own KV over the MTP rows 0..i, at rotary position i (vLLM's
convention; llama.cpp's i+1 is the same up to rounding: rotary is relative), every norm
(1 + w). Row i predicts x_{i+2}. Drafting K tokens chains: row i+1 is (d, m_i).

How the MTP weights are made (and why acceptance is useful): norms 0.1 N(0,1), the layer's
attention and MLP N(0, 0.02) (transformers' init); then, on the target's own rollouts (greedy and
temperature-1 sampled, 64 random 8-token prompts + 40 tokens, seed 4321), `fc` is fitted by ridge
regression so that fc([..]) ~ h_{i+1}, the target's next hidden state, and the layer's down_proj
so that the MLP (over its random features) fits what remains; bf16 like the rest. The head then
predicts the target's next-next token about a quarter of the time on the fixture's sequence
(stats.mtp_greedy_acceptance; the tiny random target is close to noise), so drafts are both
accepted and rejected, while its attention moves the logits well past any tolerance.

Output (tests/models/qwen3_5-mtp-tiny/): config.json (+ mtp_num_hidden_layers 1), the model's and
the head's weights in model.safetensors, tokenizer files, reference.json + reference.bin:
  prefill_logits      [24, V]  the model at the prompt's positions (== qwen3_5-tiny's)
  greedy_step_logits  [24, V]  the 24 greedy steps after it
  mtp_logits          [47, V]  the head's row i = 0..46 over the prompt + greedy tokens
  mtp_chain_logits    [3, V]   drafting 3 from the prompt's end: rows 23 (x_24, h_23), 24, 25 chained
  mtp_hidden          [47, H]  m_i (the head's output hidden state) for the rows of mtp_logits

Run here (numpy only): /usr/bin/python3 tests/models/make_qwen3_5_mtp_fixture.py
"""
import hashlib, json, os, shutil, struct, sys
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "qwen3_5-tiny")
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "qwen3_5-mtp-tiny")
SEED = 4321


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        blob = f.read()
    out = {}
    for name, meta in head.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        assert meta["dtype"] == "BF16", (name, meta["dtype"])
        u = np.frombuffer(blob[a:b], dtype=np.uint16).astype(np.uint32) << 16
        out[name] = u.view(np.float32).reshape(meta["shape"]).copy()
    return out


def to_bf16_bits(x):
    """Round-to-nearest-even float32 -> bfloat16 bits."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def bf16_round(x):
    return (to_bf16_bits(x).astype(np.uint32) << 16).view(np.float32).reshape(np.shape(x))


def write_safetensors(path, tensors):
    head, blobs, off = {}, [], 0
    for name in sorted(tensors):
        b = to_bf16_bits(tensors[name]).tobytes()
        head[name] = {"dtype": "BF16", "shape": list(np.shape(tensors[name])), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    head["__metadata__"] = {"format": "pt"}
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


cfg = json.load(open(os.path.join(SRC, "config.json")))
H, EPS = cfg["hidden_size"], cfg["rms_norm_eps"]
NH, NKV, HD = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
NK, NV, DK, DV = (cfg["linear_num_key_heads"], cfg["linear_num_value_heads"], cfg["linear_key_head_dim"],
                  cfg["linear_value_head_dim"])
ROT = int(HD * cfg["rope_parameters"]["partial_rotary_factor"])
THETA = cfg["rope_parameters"]["rope_theta"]
V = cfg["vocab_size"]


def rms(x, w, one_plus=True):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS)
    return y * ((1.0 + w) if one_plus else w)


def silu(x):
    return x / (1.0 + np.exp(-x))


def rope(x, pos):  # x [T, heads, HD]; rotary on the first ROT dims, halves rotated
    inv = 1.0 / (THETA ** (np.arange(0, ROT, 2, dtype=np.float64) / ROT))
    f = np.outer(np.asarray(pos, dtype=np.float64), inv)
    cos = np.cos(np.concatenate([f, f], -1)).astype(np.float32)[:, None, :]
    sin = np.sin(np.concatenate([f, f], -1)).astype(np.float32)[:, None, :]
    r, p = x[..., :ROT], x[..., ROT:]
    rh = np.concatenate([-r[..., ROT // 2:], r[..., :ROT // 2]], -1)
    return np.concatenate([r * cos + rh * sin, p], -1)


def attention(W, p, x, pos):
    T = x.shape[0]
    qg = (x @ W[p + "self_attn.q_proj.weight"].T).reshape(T, NH, 2 * HD)
    q, gate = qg[..., :HD], qg[..., HD:].reshape(T, NH * HD)
    k = (x @ W[p + "self_attn.k_proj.weight"].T).reshape(T, NKV, HD)
    v = (x @ W[p + "self_attn.v_proj.weight"].T).reshape(T, NKV, HD)
    q = rope(rms(q, W[p + "self_attn.q_norm.weight"]), pos)
    k = rope(rms(k, W[p + "self_attn.k_norm.weight"]), pos)
    out = np.zeros((T, NH, HD), np.float32)
    mask = np.triu(np.full((T, T), -np.inf, np.float32), 1)
    for h in range(NH):
        kh = h // (NH // NKV)
        s = (q[:, h] @ k[:, kh].T) / np.sqrt(HD) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        out[:, h] = (s / s.sum(-1, keepdims=True)) @ v[:, kh]
    return (out.reshape(T, NH * HD) * (1.0 / (1.0 + np.exp(-gate)))) @ W[p + "self_attn.o_proj.weight"].T


def deltanet(W, p, x):
    T = x.shape[0]
    qkv = x @ W[p + "linear_attn.in_proj_qkv.weight"].T  # [T, 2*NK*DK + NV*DV]
    cw = W[p + "linear_attn.conv1d.weight"][:, 0, :]      # [C, 4]
    K = cw.shape[1]
    pad = np.concatenate([np.zeros((K - 1, qkv.shape[1]), np.float32), qkv], 0)
    conv = silu(sum(pad[j:j + T] * cw[:, j] for j in range(K)))
    q = conv[:, :NK * DK].reshape(T, NK, DK)
    k = conv[:, NK * DK:2 * NK * DK].reshape(T, NK, DK)
    v = conv[:, 2 * NK * DK:].reshape(T, NV, DV)
    z = (x @ W[p + "linear_attn.in_proj_z.weight"].T).reshape(T, NV, DV)
    beta = 1.0 / (1.0 + np.exp(-(x @ W[p + "linear_attn.in_proj_b.weight"].T)))
    a = x @ W[p + "linear_attn.in_proj_a.weight"].T + W[p + "linear_attn.dt_bias"]
    g = -np.exp(W[p + "linear_attn.A_log"]) * np.log1p(np.exp(a))  # softplus
    rep = NV // NK
    q, k = np.repeat(q, rep, axis=1), np.repeat(k, rep, axis=1)  # value head h reads key head h // rep
    q = q / np.sqrt(np.sum(q * q, -1, keepdims=True) + 1e-6) / np.sqrt(DK)
    k = k / np.sqrt(np.sum(k * k, -1, keepdims=True) + 1e-6)
    S = np.zeros((NV, DK, DV), np.float32)
    o = np.zeros((T, NV, DV), np.float32)
    for t in range(T):
        S = S * np.exp(g[t])[:, None, None]
        mem = np.einsum("hk,hkv->hv", k[t], S)
        delta = (v[t] - mem) * beta[t][:, None]
        S = S + np.einsum("hk,hv->hkv", k[t], delta)
        o[t] = np.einsum("hk,hkv->hv", q[t], S)
    o = rms(o, W[p + "linear_attn.norm.weight"], one_plus=False) * silu(z)
    return o.reshape(T, NV * DV) @ W[p + "linear_attn.out_proj.weight"].T


def mlp(W, p, x):
    return (silu(x @ W[p + "mlp.gate_proj.weight"].T) * (x @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T


def decoder_layer(W, p, x, pos, kind):
    hx = rms(x, W[p + "input_layernorm.weight"])
    x = x + (deltanet(W, p, hx) if kind == "linear_attention" else attention(W, p, hx, pos))
    return x + mlp(W, p, rms(x, W[p + "post_attention_layernorm.weight"]))


def model(W, ids):
    """The target: final hidden states (after model.norm) and logits at every position."""
    x = W["model.embed_tokens.weight"][ids].astype(np.float32)
    pos = np.arange(len(ids))
    for i, kind in enumerate(cfg["layer_types"]):
        x = decoder_layer(W, "model.layers.%d." % i, x, pos, kind)
    h = rms(x, W["model.norm.weight"])
    return h, h @ W["lm_head.weight"].T


def mtp_inputs(W, tokens_next, hidden):
    e = rms(W["model.embed_tokens.weight"][tokens_next], W["mtp.pre_fc_norm_embedding.weight"])
    return np.concatenate([e, rms(hidden, W["mtp.pre_fc_norm_hidden.weight"])], -1)


def mtp(W, tokens_next, hidden, pos):
    """The head over rows (tokens_next[r], hidden[r]) at positions pos (one causal run)."""
    x = mtp_inputs(W, tokens_next, hidden) @ W["mtp.fc.weight"].T
    x = decoder_layer(W, "mtp.layers.0.", x, pos, "full_attention")
    m = rms(x, W["mtp.norm.weight"])
    return m, m @ W["lm_head.weight"].T


def softmax_sample(logits, rng):
    p = np.exp(logits - logits.max())
    return int(rng.choice(len(p), p=p / p.sum()))


def main():
    W = read_safetensors(os.path.join(SRC, "model.safetensors"))
    ref = json.load(open(os.path.join(SRC, "reference.json")))
    blob = np.fromfile(os.path.join(SRC, "reference.bin"), dtype="<f4")
    arrays = {a["name"]: blob[a["offset_bytes"] // 4:a["offset_bytes"] // 4 + int(np.prod(a["shape"]))].reshape(a["shape"])
              for a in ref["arrays"]}
    prompt, greedy = ref["input_ids"], ref["greedy_ids"]
    seq = prompt + greedy
    h, logits = model(W, np.array(seq[:-1]))
    err_p = float(np.abs(logits[:len(prompt)] - arrays["prefill_logits"]).max())
    err_g = float(np.abs(logits[len(prompt) - 1:] - arrays["greedy_step_logits"]).max())
    print("numpy model vs transformers: prefill max|d| %.3g, greedy steps %.3g" % (err_p, err_g))
    assert err_p < 1e-4 and err_g < 1e-4, "the numpy model disagrees with transformers' reference"
    assert list(np.argmax(logits[len(prompt) - 1:], -1)) == greedy

    rng = np.random.default_rng(SEED)
    init = lambda *shape, std=0.02: (std * rng.standard_normal(shape)).astype(np.float32)
    Hq = NH * HD
    mtpw = {"mtp.pre_fc_norm_embedding.weight": init(H, std=0.1), "mtp.pre_fc_norm_hidden.weight": init(H, std=0.1),
            "mtp.norm.weight": init(H, std=0.1),
            "mtp.layers.0.input_layernorm.weight": init(H, std=0.1),
            "mtp.layers.0.post_attention_layernorm.weight": init(H, std=0.1),
            "mtp.layers.0.self_attn.q_proj.weight": init(2 * Hq, H), "mtp.layers.0.self_attn.k_proj.weight": init(NKV * HD, H),
            "mtp.layers.0.self_attn.v_proj.weight": init(NKV * HD, H), "mtp.layers.0.self_attn.o_proj.weight": init(H, Hq),
            "mtp.layers.0.self_attn.q_norm.weight": init(HD, std=0.1), "mtp.layers.0.self_attn.k_norm.weight": init(HD, std=0.1),
            "mtp.layers.0.mlp.gate_proj.weight": init(cfg["intermediate_size"], H),
            "mtp.layers.0.mlp.up_proj.weight": init(cfg["intermediate_size"], H),
            "mtp.layers.0.mlp.down_proj.weight": init(H, cfg["intermediate_size"])}
    W.update({k: bf16_round(v) for k, v in mtpw.items()})

    # The fit: the target's rollouts from random prompts, greedy and sampled; first fc (linear in
    # the head's inputs), then the layer's down_proj over its MLP's (fixed, random) features.
    seqs = []
    for r in range(64):
        ids = list(rng.integers(0, V - 4, size=8))
        for _ in range(40):
            _, lg = model(W, np.array(ids))
            ids.append(int(np.argmax(lg[-1])) if r % 2 == 0 else softmax_sample(lg[-1], rng))
        hh, _ = model(W, np.array(ids))
        seqs.append((np.array(ids), hh))
    ridge = lambda X, Y, lam: np.linalg.solve(X.T @ X + lam * np.eye(X.shape[1]), X.T @ Y).T.astype(np.float32)
    X = np.concatenate([mtp_inputs(W, ids[1:], hh[:-1]) for ids, hh in seqs]).astype(np.float64)
    Y = np.concatenate([hh[1:] for _, hh in seqs]).astype(np.float64)
    W["mtp.fc.weight"] = bf16_round(ridge(X, Y, 1e-2))
    F, R = [], []
    L = "mtp.layers.0."
    for ids, hh in seqs:
        x = mtp_inputs(W, ids[1:], hh[:-1]) @ W["mtp.fc.weight"].T
        x = x + attention(W, L, rms(x, W[L + "input_layernorm.weight"]), np.arange(len(x)))
        u = rms(x, W[L + "post_attention_layernorm.weight"])
        F.append(silu(u @ W[L + "mlp.gate_proj.weight"].T) * (u @ W[L + "mlp.up_proj.weight"].T))
        R.append(hh[1:] - x)
    F, R = np.concatenate(F).astype(np.float64), np.concatenate(R).astype(np.float64)
    W[L + "mlp.down_proj.weight"] = bf16_round(ridge(F, R, 1e-3))
    print("fit on %d rows: relative residual %.3f, after the MLP %.3f" % (
        len(X), np.linalg.norm(X @ W["mtp.fc.weight"].T - Y) / np.linalg.norm(Y),
        np.linalg.norm(F @ W[L + "mlp.down_proj.weight"].T - R) / np.linalg.norm(Y)))

    # The reference over the fixture's sequence (the prompt and its 24 greedy tokens).
    S = np.array(seq)
    h, logits = model(W, S[:-1])                       # 47 positions
    m, mtp_logits = mtp(W, S[1:], h, np.arange(len(S) - 1))
    acc = float(np.mean(np.argmax(mtp_logits[:-1], -1) == np.argmax(logits[1:], -1)))
    # Drafting 3 from the prompt's end: row 23 = (x_24, h_23); then (d, m) chained.
    n = len(prompt)
    toks, hid = list(S[1:n + 1]), list(h[:n])  # rows 0..23, the last the first draft row
    chain = []
    for j in range(3):
        mm, ll = mtp(W, np.array(toks), np.array(hid), np.arange(len(toks)))
        chain.append(ll[-1])
        toks.append(int(np.argmax(ll[-1])))
        hid.append(mm[-1])
    chain = np.array(chain, np.float32)
    print("head: greedy acceptance %.2f on the fixture's sequence; chained drafts %s (target %s)" %
          (acc, toks[-3:], seq[n + 1:n + 4]))
    assert 0.2 <= acc <= 0.95, "the head should be useful but not perfect"

    os.makedirs(OUT, exist_ok=True)
    for fn in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(os.path.join(SRC, fn), os.path.join(OUT, fn))
    c2 = dict(cfg)
    c2["mtp_num_hidden_layers"] = 1
    c2["mtp_use_dedicated_embeddings"] = False
    json.dump(c2, open(os.path.join(OUT, "config.json"), "w"), indent=2)
    write_safetensors(os.path.join(OUT, "model.safetensors"), W)
    out = {"prefill_logits": logits[:n], "greedy_step_logits": logits[n - 1:], "mtp_logits": mtp_logits,
           "mtp_chain_logits": chain, "mtp_hidden": m}
    data, meta, off = b"", [], 0
    for name, a in out.items():
        a = np.ascontiguousarray(a, dtype="<f4")
        meta.append({"name": name, "offset_bytes": off, "shape": list(a.shape)})
        data += a.tobytes()
        off += a.nbytes
    open(os.path.join(OUT, "reference.bin"), "wb").write(data)
    doc = {"model": "qwen3_5", "architecture": cfg["architectures"][0], "source": "tests/models/qwen3_5-tiny + an MTP layer",
           "script": "tests/models/make_qwen3_5_mtp_fixture.py", "seed": SEED, "numpy": np.__version__,
           "init": __doc__.split("How the MTP weights are made")[1].split("Output")[0].strip(),
           "reference_compute": "numpy float32 on the CPU from the bf16 weights; the model part checked against "
                                "transformers' logits of qwen3_5-tiny (max |d| prefill %.3g, steps %.3g)" % (err_p, err_g),
           "input_ids": prompt, "greedy_ids": greedy, "mtp_chain_ids": toks[-3:],
           "bin_file": "reference.bin", "bin_sha256": hashlib.sha256(data).hexdigest(), "dtype": "float32 little-endian",
           "arrays": meta, "stats": {"mtp_greedy_acceptance": acc}, "config": c2}
    json.dump(doc, open(os.path.join(OUT, "reference.json"), "w"), indent=1)
    print("wrote", OUT)


main()
