"""The anchor of `cargo xtask bench embed` and `bench context`: the same converted model (model.onnx)
and tokenizer run by onnxruntime with 2 threads, the same texts, the same pooling.

    python ort_embed.py MODEL_DIR [SENTENCES_FILE]

Driven by embed-bench and context-bench over stdin/stdout, one command per line and one JSON line
per answer, so that its passes alternate with ours and both see the machine in the same state:

    version        -> {"version": "1.31.1"}
    pass B         -> {"per_s": ...}   one pass over all sentences in batches of B
    query_load     -> {"p50_ms": ..., "p99_ms": ...}   a short query's latency while another thread
                                                       keeps the model busy with batches of 32
    texts PATH B   -> {"per_s": ..., "count": N}   one pass over the N texts of PATH (a file of one
                      JSON string per line, read once) in the shape the server embeds an agent's
                      item chunks: requests of at most 128 texts in file order, each sorted by
                      length and run in batches of B

`pass` and `query_load` need SENTENCES_FILE; `texts` does not. PATH may contain spaces (B is the
last word of the line). An unknown or unusable command answers {"error": ...}.
"""

import json
import sys
import threading
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer


# The server's most texts per embedding request (`MAX_INPUTS`): an agent's item chunks go in
# requests of this many, each sorted by length and run in batches of 32 (`RUN_BATCH`).
REQUEST = 128


def main(model_dir: str, sentences_file: str | None) -> None:
    sentences = []
    if sentences_file is not None:
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

    loaded = {}

    def load_texts(path):
        if path not in loaded:
            with open(path, encoding="utf-8") as f:
                loaded[path] = [json.loads(line) for line in f if line.strip()]
        return loaded[path]

    def texts_pass(path, batch):
        texts = load_texts(path)
        if not texts:
            return {"error": f"no texts in {path!r}"}
        start = time.perf_counter()
        for i in range(0, len(texts), REQUEST):
            request = sorted(texts[i:i + REQUEST], key=len)
            for j in range(0, len(request), batch):
                embed(request[j:j + batch])
        return {"per_s": len(texts) / (time.perf_counter() - start), "count": len(texts)}

    def answer_to(line):
        command = line.split()
        if command == ["version"]:
            return {"version": ort.__version__}
        if command[:1] in (["pass"], ["query_load"]) and not sentences:
            return {"error": f"{command[0]} needs SENTENCES_FILE"}
        if len(command) == 2 and command[0] == "pass":
            return one_pass(int(command[1]))
        if command == ["query_load"]:
            return query_load()
        if len(command) >= 3 and command[0] == "texts":
            path, batch = line.strip()[len("texts"):].strip().rsplit(maxsplit=1)
            return texts_pass(path, int(batch))
        return {"error": f"unknown command {line.strip()!r}"}

    for line in sys.stdin:
        try:
            answer = answer_to(line)
        except (OSError, ValueError) as e:
            answer = {"error": f"{line.strip()!r}: {e}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
