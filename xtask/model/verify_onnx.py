"""Checks a conversion against sentence-transformers' own vectors before `cargo xtask model` accepts it:
both model.onnx and the shards/ set, their graphs run by onnx's reference evaluator (numpy) and, for the
shards, the engine's own steps (attention core, residual, layer norms) redone in numpy; tokenized by the
model's tokenizer.json, mean-pooled and normalised. Every reference sentence must reach cosine >= 0.9999.

    python verify_onnx.py OUT_DIR TOKENIZER_JSON FIXTURE_JSON
"""

import json
import sys

import numpy as np
from onnx.reference import ReferenceEvaluator
from tokenizers import Tokenizer

MIN_COSINE = 0.9999
MAX_TOKENS = 256


def unit(v):
    return v / max(np.linalg.norm(v), 1e-12)


def whole_model(out_dir: str):
    session = ReferenceEvaluator(f"{out_dir}/model.onnx")

    def embed(ids):
        ids = np.array([ids], np.int64)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0][0]
        return unit(hidden.mean(0))

    return embed


def shards(out_dir: str):
    layout = json.load(open(f"{out_dir}/shards/shards.json"))
    load = lambda name: ReferenceEvaluator(f"{out_dir}/shards/{name}.onnx")
    norms_graph = load("norms")
    norms = dict(zip(norms_graph.output_names, norms_graph.run(None, {})))
    embed_graph = load("embed")
    shard_heads, dim = layout["heads"] // layout["shards"], layout["head_dim"]
    layers = [[(load(f"layer{i}.qkv{t}"), load(f"layer{i}.attention_output{t}"), load(f"layer{i}.ffn{t}"))
               for t in range(layout["shards"])]
              for i in range(layout["layers"])]

    def layer_norm(x, name):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + layout["eps"]) * norms[f"{name}.weight"] + norms[f"{name}.bias"]

    def attention(qkv):
        """The engine's attention core for one text: qkv is [n, q | k | v], queries already scaled."""
        n = qkv.shape[0]
        q, k, v = (part.reshape(n, shard_heads, dim).transpose(1, 0, 2) for part in np.split(qkv, 3, axis=1))
        scores = q @ k.transpose(0, 2, 1)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        context = (weights / weights.sum(-1, keepdims=True)) @ v
        return context.transpose(1, 0, 2).reshape(n, shard_heads * dim)

    def embed(ids):
        n = len(ids)
        tokens = np.array(ids, np.int64)
        x = embed_graph.run(None, {"input_ids": tokens, "position_ids": np.arange(n, dtype=np.int64)})[0]
        x = layer_norm(x, "embeddings.LayerNorm")
        for i, layer in enumerate(layers):
            partials = [out.run(None, {"context": attention(qkv.run(None, {"hidden": x})[0])})[0]
                        for qkv, out, _ in layer]
            x = layer_norm(x + sum(partials), f"encoder.layer.{i}.attention.output.LayerNorm")
            x = layer_norm(x + sum(ffn.run(None, {"hidden": x})[0] for _, _, ffn in layer),
                           f"encoder.layer.{i}.output.LayerNorm")
        return unit(x.mean(0))

    return embed


def main(out_dir: str, tokenizer_path: str, fixture_path: str) -> None:
    tokenizer = Tokenizer.from_file(tokenizer_path)
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_TOKENS)
    items = json.load(open(fixture_path))["items"]
    failed = False
    for name, embed in (("model.onnx", whole_model(out_dir)), ("shards", shards(out_dir))):
        worst = 1.0
        for item in items:
            got = embed(tokenizer.encode(item["text"]).ids)
            cosine = float(np.dot(got, unit(np.array(item["embedding"], np.float32))))
            worst = min(worst, cosine)
            if cosine < MIN_COSINE:
                print(f"{name}: cosine {cosine:.6f} for {item['text'][:60]!r}", file=sys.stderr)
                failed = True
        print(f"{name}: lowest cosine to sentence-transformers over {len(items)} sentences: {worst:.8f}")
    if failed:
        sys.exit(f"the converted model in {out_dir} does not match sentence-transformers")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: verify_onnx.py OUT_DIR TOKENIZER_JSON FIXTURE_JSON")
    main(*sys.argv[1:])
