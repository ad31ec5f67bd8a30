"""Builds fp32 ONNX graphs of a BERT encoder (sentence-transformers all-MiniLM-L6-v2 and kin) from its
safetensors weights, without torch: numpy + safetensors + onnx only.

    python bert_to_onnx.py MODEL_DIR OUT_DIR [SHARDS]

MODEL_DIR holds config.json and model.safetensors. Writes into OUT_DIR:

- model.onnx: the whole encoder. Inputs input_ids and attention_mask (int64, [batch, sequence], both
  symbolic); output last_hidden_state [batch, sequence, hidden]. Any ONNX runtime can run it.
- shards/: the same weights cut for tensor-parallel execution on SHARDS threads (default 2), which is how
  the Glassbox engine runs them. Token rows are unpadded ([tokens, hidden]); each layer gives each shard
  its share of the heads (one query/key/value projection, qkv{t}, and its rows of the output projection,
  attention_output{t}) and of the intermediate units (ffn{t}). The engine runs the attention core between
  the two attention graphs (each text over its own tokens), sums the shards' partial outputs, adds the
  residual and applies the layer norms (their weights are in norms.onnx). shards.json describes the set.

Written for tract and onnxruntime: IR version 8, opset 17 (LayerNormalization), GELU spelled as
0.5*x*(1+erf(x/sqrt 2)), an additive attention mask built from Cast/Unsqueeze/Sub/Mul so it analyses under
symbolic dimensions. Initializer names are stable (derived from the checkpoint's tensor names).
"""

import json
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

OPSET = 17
IR_VERSION = 8  # onnxruntime refuses newer IR versions; tract reads either.
MASKED = -10000.0  # model.onnx's additive attention mask for padded keys


class Graph:
    """Accumulates nodes and initializers of one ONNX graph."""

    def __init__(self):
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def const(self, array, name: str) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, kind: str, inputs, **attrs) -> str:
        out = self.name(kind.lower())
        self.nodes.append(helper.make_node(kind, list(inputs), [out], **attrs))
        return out

    def gelu(self, h: str) -> str:
        half = self.const(np.array(0.5, np.float32), self.name("half"))
        one = self.const(np.array(1.0, np.float32), self.name("one"))
        sqrt2 = self.const(np.array(math.sqrt(2.0), np.float32), self.name("sqrt2"))
        return self.op("Mul", [self.op("Mul", [h, half]), self.op("Add", [one, self.op("Erf", [self.op("Div", [h, sqrt2])])])])

    def save(self, path: str, inputs, outputs, name: str) -> None:
        """Writes the graph; `outputs` maps each output name to (the value it shows, its shape)."""
        nodes = self.nodes + [helper.make_node("Identity", [src], [dst]) for dst, (src, _) in outputs.items()]
        graph = helper.make_graph(
            nodes, name, inputs,
            [float_value(dst, shape) for dst, (_, shape) in outputs.items()],
            initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="glassbox")
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        onnx.save(model, path)


class Bert:
    """The checkpoint's weights and shape parameters."""

    def __init__(self, model_dir: str):
        config = json.load(open(f"{model_dir}/config.json"))
        weights = load_file(f"{model_dir}/model.safetensors")
        # Some exports prefix every tensor with "bert."; position_ids and the pooler are not used.
        self.w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in weights.items()
                  if not k.endswith("position_ids") and "pooler" not in k}
        self.hidden = config["hidden_size"]
        self.heads = config["num_attention_heads"]
        self.head_dim = self.hidden // self.heads
        self.layers = config["num_hidden_layers"]
        self.intermediate = config["intermediate_size"]
        self.eps = float(config.get("layer_norm_eps", 1e-12))

    def linear(self, prefix: str, rows=None, cols=None, scale=1.0):
        """[in, out] weight and [out] bias of a torch Linear (stored [out, in]), optionally a slice."""
        w = self.w[f"{prefix}.weight"].T * np.float32(scale)
        b = self.w[f"{prefix}.bias"] * np.float32(scale)
        if cols is not None:
            w, b = w[:, cols], b[cols]
        if rows is not None:
            w = w[rows, :]
        return w, b


def write_full(bert: Bert, path: str) -> None:
    g = Graph()
    w = bert.w

    def linear(x: str, prefix: str) -> str:
        weight, bias = bert.linear(prefix)
        return g.op("Add", [g.op("MatMul", [x, g.const(weight, f"{prefix}.weight_t")]), g.const(bias, f"{prefix}.bias")])

    def layer_norm(x: str, prefix: str) -> str:
        return g.op("LayerNormalization",
                    [x, g.const(w[f"{prefix}.weight"], f"{prefix}.weight"), g.const(w[f"{prefix}.bias"], f"{prefix}.bias")],
                    axis=-1, epsilon=bert.eps)

    # Embeddings: word + position (first S rows) + token type 0.
    words = g.op("Gather", [g.const(w["embeddings.word_embeddings.weight"], "embeddings.word_embeddings.weight"), "input_ids"], axis=0)
    seq_len = g.op("Shape", ["input_ids"], start=1, end=2)
    zero = g.const(np.array([0], np.int64), "zero")
    positions = g.op("Slice", [g.const(w["embeddings.position_embeddings.weight"], "embeddings.position_embeddings.weight"),
                               zero, seq_len, zero])
    token_type = g.const(w["embeddings.token_type_embeddings.weight"][0], "embeddings.token_type_embeddings.0")
    x = layer_norm(g.op("Add", [g.op("Add", [words, positions]), token_type]), "embeddings.LayerNorm")

    # Additive mask [B, 1, 1, S]: 0 where attended, MASKED where padded.
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    mask = g.op("Unsqueeze", [mask, g.const(np.array([1, 2], np.int64), "mask_axes")])
    mask = g.op("Mul", [g.op("Sub", [g.const(np.array(1.0, np.float32), "mask_one"), mask]),
                        g.const(np.array(MASKED, np.float32), "mask_value")])

    split_heads = g.const(np.array([0, 0, bert.heads, bert.head_dim], np.int64), "split_heads")
    merge_heads = g.const(np.array([0, 0, bert.hidden], np.int64), "merge_heads")
    scale = g.const(np.array(1.0 / math.sqrt(bert.head_dim), np.float32), "scale")

    for i in range(bert.layers):
        p = f"encoder.layer.{i}"

        def heads_of(t: str) -> str:
            return g.op("Transpose", [g.op("Reshape", [t, split_heads])], perm=[0, 2, 1, 3])

        q = heads_of(linear(x, f"{p}.attention.self.query"))
        k = heads_of(linear(x, f"{p}.attention.self.key"))
        v = heads_of(linear(x, f"{p}.attention.self.value"))
        scores = g.op("Mul", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]), scale])
        probs = g.op("Softmax", [g.op("Add", [scores, mask])], axis=-1)
        context = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3]), merge_heads])
        x = layer_norm(g.op("Add", [linear(context, f"{p}.attention.output.dense"), x]), f"{p}.attention.output.LayerNorm")
        h = g.gelu(linear(x, f"{p}.intermediate.dense"))
        x = layer_norm(g.op("Add", [linear(h, f"{p}.output.dense"), x]), f"{p}.output.LayerNorm")

    ids = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"]) for n in ("input_ids", "attention_mask")]
    g.save(path, ids, {"last_hidden_state": (x, ["batch", "sequence", bert.hidden])}, "bert_encoder")


def float_value(name: str, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def int_input(name: str, shape):
    return helper.make_tensor_value_info(name, TensorProto.INT64, shape)


def write_shards(bert: Bert, out: str, shards: int) -> None:
    if bert.heads % shards or bert.intermediate % shards:
        sys.exit(f"{shards} shards do not divide {bert.heads} heads and {bert.intermediate} intermediate units")
    os.makedirs(out, exist_ok=True)
    w, hidden = bert.w, bert.hidden
    rows = ["tokens", hidden]

    # Embeddings of unpadded tokens; the engine applies embeddings.LayerNorm.
    g = Graph()
    words = g.op("Gather", [g.const(w["embeddings.word_embeddings.weight"], "word_embeddings"), "input_ids"], axis=0)
    positions = g.op("Gather", [g.const(w["embeddings.position_embeddings.weight"], "position_embeddings"), "position_ids"], axis=0)
    token_type = g.const(w["embeddings.token_type_embeddings.weight"][0], "token_type_0")
    g.save(f"{out}/embed.onnx", [int_input("input_ids", ["tokens"]), int_input("position_ids", ["tokens"])],
           {"embeddings": (g.op("Add", [g.op("Add", [words, positions]), token_type]), rows)}, "embed")

    # Layer norm weights, as the outputs of a graph without inputs.
    g, norms = Graph(), {}
    names = ["embeddings.LayerNorm"] + [f"encoder.layer.{i}.{n}" for i in range(bert.layers)
                                        for n in ("attention.output.LayerNorm", "output.LayerNorm")]
    for n in names:
        for part in ("weight", "bias"):
            norms[f"{n}.{part}"] = (g.const(w[f"{n}.{part}"], f"{n}.{part}.value"), [hidden])
    g.save(f"{out}/norms.onnx", [], norms, "norms")

    per_shard = bert.heads // shards
    width = per_shard * bert.head_dim
    ffn = bert.intermediate // shards
    for i in range(bert.layers):
        p = f"encoder.layer.{i}"
        for t in range(shards):
            cols = slice(t * width, (t + 1) * width)
            # One projection for this shard's queries (scaled by 1/sqrt(head_dim)), keys and values:
            # [tokens, q | k | v], head after head in each part. The engine runs the attention core
            # itself, over each text's own tokens, then this shard's rows of the output projection.
            q_w, q_b = bert.linear(f"{p}.attention.self.query", cols=cols, scale=1.0 / math.sqrt(bert.head_dim))
            k_w, k_b = bert.linear(f"{p}.attention.self.key", cols=cols)
            v_w, v_b = bert.linear(f"{p}.attention.self.value", cols=cols)
            g = Graph()
            qkv = g.op("Add", [g.op("MatMul", ["hidden", g.const(np.concatenate([q_w, k_w, v_w], 1), "qkv.weight")]),
                               g.const(np.concatenate([q_b, k_b, v_b]), "qkv.bias")])
            g.save(f"{out}/layer{i}.qkv{t}.onnx", [float_value("hidden", rows)],
                   {"qkv": (qkv, ["tokens", 3 * width])}, f"layer{i}_qkv{t}")

            g = Graph()
            weight, bias = bert.linear(f"{p}.attention.output.dense", rows=cols)
            out_proj = g.op("MatMul", ["context", g.const(weight, "output.weight")])
            if t == 0:
                out_proj = g.op("Add", [out_proj, g.const(bias, "output.bias")])
            g.save(f"{out}/layer{i}.attention_output{t}.onnx", [float_value("context", ["tokens", width])],
                   {"partial": (out_proj, rows)}, f"layer{i}_attention_output{t}")

            units = slice(t * ffn, (t + 1) * ffn)
            g = Graph()
            weight, bias = bert.linear(f"{p}.intermediate.dense", cols=units)
            h = g.op("Add", [g.op("MatMul", ["hidden", g.const(weight, "intermediate.weight")]), g.const(bias, "intermediate.bias")])
            weight, bias = bert.linear(f"{p}.output.dense", rows=units)
            y = g.op("MatMul", [g.gelu(h), g.const(weight, "output.weight")])
            if t == 0:
                y = g.op("Add", [y, g.const(bias, "output.bias")])
            g.save(f"{out}/layer{i}.ffn{t}.onnx", [float_value("hidden", rows)], {"partial": (y, rows)}, f"layer{i}_ffn{t}")

    json.dump({"shards": shards, "layers": bert.layers, "hidden": hidden, "heads": bert.heads,
               "head_dim": bert.head_dim, "eps": bert.eps,
               "max_positions": int(w["embeddings.position_embeddings.weight"].shape[0])},
              open(f"{out}/shards.json", "w"), indent=1)


def main(model_dir: str, out_dir: str, shards: int) -> None:
    bert = Bert(model_dir)
    os.makedirs(out_dir, exist_ok=True)
    write_full(bert, f"{out_dir}/model.onnx")
    write_shards(bert, f"{out_dir}/shards", shards)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: bert_to_onnx.py MODEL_DIR OUT_DIR [SHARDS]")
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else 2)
