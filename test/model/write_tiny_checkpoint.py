#!/usr/bin/env python3
"""Writes a tiny Hugging Face Qwen3 checkpoint: config.json, model.safetensors.index.json and
two bf16 safetensors shards with Qwen3ForCausalLM tensor names and [out, in] projection shapes
(ws1check's `synthetic:tiny` dims). Written with numpy only (bf16 as RNE-rounded uint16 bits),
independently of ws1check's own safetensors writer.

Usage: write_tiny_checkpoint.py OUT_DIR [--seed N] [--omit NAME] [--reshape NAME] [--f32 NAME]
                                [--layers N] [--kv-heads N]
  --omit     leave the tensor out of its shard and the index (a missing tensor)
  --reshape  store the tensor with its first dimension one short (a mis-shaped tensor)
  --f32      store the tensor as F32 (a wrong dtype)
  --layers, --kv-heads  another layout than synthetic:tiny's (a fine-tuned or resized policy)
"""
import argparse
import json
import os
import struct

import numpy as np

CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 256,
    "max_position_embeddings": 40960,
    "rope_theta": 1000000.0,
    "rope_scaling": None,
    "rms_norm_eps": 1e-06,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "attention_bias": False,
    "torch_dtype": "bfloat16",
}


def tensors(rng):
    c = CONFIG
    h, d, i, v = c["hidden_size"], c["head_dim"], c["intermediate_size"], c["vocab_size"]
    qd, kvd = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    out = {"model.embed_tokens.weight": rng.standard_normal((v, h))}
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        out[p + "input_layernorm.weight"] = 1 + rng.standard_normal(h) / 8
        out[p + "self_attn.q_proj.weight"] = rng.standard_normal((qd, h)) / np.sqrt(h)
        out[p + "self_attn.k_proj.weight"] = rng.standard_normal((kvd, h)) / np.sqrt(h)
        out[p + "self_attn.v_proj.weight"] = rng.standard_normal((kvd, h)) / np.sqrt(h)
        out[p + "self_attn.q_norm.weight"] = 1 + rng.standard_normal(d) / 8
        out[p + "self_attn.k_norm.weight"] = 1 + rng.standard_normal(d) / 8
        out[p + "self_attn.o_proj.weight"] = rng.standard_normal((h, qd)) / np.sqrt(qd)
        out[p + "post_attention_layernorm.weight"] = 1 + rng.standard_normal(h) / 8
        out[p + "mlp.gate_proj.weight"] = rng.standard_normal((i, h)) / np.sqrt(h)
        out[p + "mlp.up_proj.weight"] = rng.standard_normal((i, h)) / np.sqrt(h)
        out[p + "mlp.down_proj.weight"] = rng.standard_normal((h, i)) / np.sqrt(i)
    out["model.norm.weight"] = 1 + rng.standard_normal(h) / 8
    out["lm_head.weight"] = rng.standard_normal((v, h)) / np.sqrt(h)
    return out


def bf16_bytes(a):
    """float32 -> bf16 bits, round to nearest even (finite values)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
    return r.tobytes()


def write_safetensors(path, named):
    """named: list of (name, dtype string, shape, bytes) in file order."""
    header, offset = {}, 0
    for name, dtype, shape, data in named:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, data in named:
            f.write(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=20260812)
    ap.add_argument("--omit", action="append", default=[])
    ap.add_argument("--reshape", action="append", default=[])
    ap.add_argument("--f32", action="append", default=[])
    ap.add_argument("--layers", type=int, default=CONFIG["num_hidden_layers"])
    ap.add_argument("--kv-heads", type=int, default=CONFIG["num_key_value_heads"])
    a = ap.parse_args()
    CONFIG["num_hidden_layers"] = a.layers
    CONFIG["num_key_value_heads"] = a.kv_heads
    os.makedirs(a.out, exist_ok=True)
    all_tensors = tensors(np.random.default_rng(a.seed))
    names = list(all_tensors)
    shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    weight_map, total = {}, 0
    for shard, members in shards.items():
        named = []
        for n in members:
            if n in a.omit:
                continue
            t = np.asarray(all_tensors[n], dtype=np.float32)
            if n in a.reshape:
                t = t[:-1]
            if n in a.f32:
                named.append((n, "F32", t.shape, t.astype("<f4").tobytes()))
            else:
                named.append((n, "BF16", t.shape, bf16_bytes(t)))
            weight_map[n] = shard
            total += len(named[-1][3])
        write_safetensors(os.path.join(a.out, shard), named)
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)


if __name__ == "__main__":
    main()
