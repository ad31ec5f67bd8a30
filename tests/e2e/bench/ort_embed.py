"""The anchor of `cargo xtask bench embed`: the same converted model (model.onnx) and tokenizer run by
onnxruntime with 2 threads, the same sentences, the same pooling.

    python ort_embed.py MODEL_DIR SENTENCES_FILE

Driven by embed-bench over stdin/stdout, one JSON line per answer, so that its passes alternate with
ours and both see the machine in the same state:

    version        -> {"version": "1.31.1"}
    pass B         -> {"per_s": ...}   one pass over all sentences in batches of B
    query_load     -> {"p50_ms": ..., "p99_ms": ...}   a short query's latency while another thread
                                                       keeps the model busy with batches of 32
"""

import json
import sys
import threading
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer


def main(model_dir: str, sentences_file: str) -> None:
    sentences = [line.strip() for line in open(sentences_file) if line.strip()]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(f"{model_dir}/model.onnx", options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    tokenizer.enable_padding()  # batch-longest
    tokenizer.enable_truncation(256)

    def embed(texts):
        encodings = tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        m = mask[..., None].astype(np.float32)
        pooled = (hidden * m).sum(1) / np.maximum(m.sum(1), 1.0)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    def one_pass(batch):
        start = time.perf_counter()
        for i in range(0, len(sentences), batch):
            embed(sentences[i:i + batch])
        return {"per_s": len(sentences) / (time.perf_counter() - start)}

    def query_load():
        stop = threading.Event()

        def background():
            while not stop.is_set():
                embed(sentences[:32])

        worker = threading.Thread(target=background)
        worker.start()
        latencies = []
        for _ in range(100):
            start = time.perf_counter()
            embed(["How do I reset my password?"])
            latencies.append((time.perf_counter() - start) * 1000)
        stop.set()
        worker.join()
        latencies.sort()
        return {"p50_ms": latencies[49], "p99_ms": latencies[98]}

    for line in sys.stdin:
        command = line.split()
        if command == ["version"]:
            answer = {"version": ort.__version__}
        elif len(command) == 2 and command[0] == "pass":
            answer = one_pass(int(command[1]))
        elif command == ["query_load"]:
            answer = query_load()
        else:
            answer = {"error": f"unknown command {line.strip()!r}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
