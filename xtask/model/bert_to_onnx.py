"""Builds an fp32 ONNX graph of a BERT encoder (sentence-transformers all-MiniLM-L6-v2 and kin) from its
safetensors weights, without torch: numpy + safetensors + onnx only.

    python bert_to_onnx.py MODEL_DIR OUT.onnx

MODEL_DIR holds config.json and model.safetensors. The graph takes input_ids and attention_mask
(int64, [batch, sequence], both symbolic) and returns last_hidden_state [batch, sequence, hidden];
pooling and normalisation are done by the engine. Written for tract and onnxruntime: IR version 8,
opset 17 (LayerNormalization), GELU spelled as 0.5*x*(1+erf(x/sqrt 2)), an additive attention mask built
from Cast/Unsqueeze/Sub/Mul so it analyses under symbolic dimensions.
"""

import json
import math
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file


def main(model_dir: str, out_path: str) -> None:
    config = json.load(open(f"{model_dir}/config.json"))
    weights = load_file(f"{model_dir}/model.safetensors")
    # Some exports prefix every tensor with "bert."; position_ids and the pooler are not used.
    weights = {k.removeprefix("bert."): v.astype(np.float32) for k, v in weights.items()
               if not k.endswith("position_ids") and "pooler" not in k}

    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    head_dim = hidden // heads
    layers = config["num_hidden_layers"]
    eps = float(config.get("layer_norm_eps", 1e-12))

    nodes, inits = [], []
    counter = [0]

    def name(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}_{counter[0]}"

    def const(array, prefix="c") -> str:
        n = name(prefix)
        inits.append(numpy_helper.from_array(np.asarray(array), n))
        return n

    def weight(key: str) -> str:
        inits.append(numpy_helper.from_array(weights[key], key))
        return key

    def op(kind: str, inputs, **attrs) -> str:
        out = name(kind.lower())
        nodes.append(helper.make_node(kind, list(inputs), [out], **attrs))
        return out

    def linear(x: str, prefix: str) -> str:
        # torch Linear stores [out, in]; MatMul wants [in, out].
        w = const(weights[f"{prefix}.weight"].T.copy(), prefix.replace(".", "_") + "_wt")
        return op("Add", [op("MatMul", [x, w]), weight(f"{prefix}.bias")])

    def layer_norm(x: str, prefix: str) -> str:
        return op("LayerNormalization", [x, weight(f"{prefix}.weight"), weight(f"{prefix}.bias")],
                  axis=-1, epsilon=eps)

    # Embeddings: word + position (first S rows) + token type 0.
    words = op("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], axis=0)
    seq_len = op("Shape", ["input_ids"], start=1, end=2)
    positions = op("Slice", [weight("embeddings.position_embeddings.weight"), const(np.array([0], np.int64)),
                             seq_len, const(np.array([0], np.int64))])
    token_type = const(weights["embeddings.token_type_embeddings.weight"][0], "token_type_0")
    x = op("Add", [op("Add", [words, positions]), token_type])
    x = layer_norm(x, "embeddings.LayerNorm")

    # Additive mask [B, 1, 1, S]: 0 where attended, -10000 where padded.
    mask = op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    mask = op("Unsqueeze", [mask, const(np.array([1, 2], np.int64))])
    mask = op("Mul", [op("Sub", [const(np.array(1.0, np.float32)), mask]), const(np.array(-10000.0, np.float32))])

    split_heads = const(np.array([0, 0, heads, head_dim], np.int64), "split_heads")
    merge_heads = const(np.array([0, 0, hidden], np.int64), "merge_heads")
    scale = const(np.array(1.0 / math.sqrt(head_dim), np.float32), "scale")
    half = const(np.array(0.5, np.float32))
    one = const(np.array(1.0, np.float32))
    sqrt2 = const(np.array(math.sqrt(2.0), np.float32))

    for i in range(layers):
        p = f"encoder.layer.{i}"

        def heads_of(t: str) -> str:
            return op("Transpose", [op("Reshape", [t, split_heads])], perm=[0, 2, 1, 3])

        q = heads_of(linear(x, f"{p}.attention.self.query"))
        k = heads_of(linear(x, f"{p}.attention.self.key"))
        v = heads_of(linear(x, f"{p}.attention.self.value"))
        scores = op("Mul", [op("MatMul", [q, op("Transpose", [k], perm=[0, 1, 3, 2])]), scale])
        probs = op("Softmax", [op("Add", [scores, mask])], axis=-1)
        context = op("Reshape", [op("Transpose", [op("MatMul", [probs, v])], perm=[0, 2, 1, 3]), merge_heads])
        attn = linear(context, f"{p}.attention.output.dense")
        x = layer_norm(op("Add", [attn, x]), f"{p}.attention.output.LayerNorm")

        h = linear(x, f"{p}.intermediate.dense")
        gelu = op("Mul", [op("Mul", [h, half]), op("Add", [one, op("Erf", [op("Div", [h, sqrt2])])])])
        out = linear(gelu, f"{p}.output.dense")
        x = layer_norm(op("Add", [out, x]), f"{p}.output.LayerNorm")

    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    graph = helper.make_graph(
        nodes,
        "bert_encoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="glassbox")
    model.ir_version = 8  # onnxruntime refuses newer IR versions; tract reads either.
    onnx.checker.check_model(model)
    onnx.save(model, out_path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: bert_to_onnx.py MODEL_DIR OUT.onnx")
    main(sys.argv[1], sys.argv[2])
