// Token-counting contenders, each loaded and timed inside a dedicated worker (the same context
// for all). Message in: {contender, big, chat}; out: {contender, readyMs, fetchMs, bigTokens,
// bigMs: [..], chatTokens, chatUs, resources: [urls]}.
const loaders = {
  async glassbox() {
    const mod = await import('/dist/glassbox_token_worker.js');
    await mod.default({ module_or_path: '/dist/glassbox_token_worker_bg.wasm' });
    const t = performance.now();
    const bytes = new Uint8Array(await (await fetch('/dist/vocab/o200k_base.gbv')).arrayBuffer());
    const fetchMs = performance.now() - t;
    const counter = new mod.Counter(bytes);
    return { count: (s) => counter.count(s), fetchMs };
  },
  // Llama 3's Hugging Face tokenizer, run by the `tokenizers` crate in our second worker module.
  async 'glassbox-llama3'() {
    const mod = await import('/dist/glassbox_token_worker_hf.js');
    await mod.default({ module_or_path: '/dist/glassbox_token_worker_hf_bg.wasm' });
    const t = performance.now();
    const bytes = new Uint8Array(await (await fetch('/dist/vocab/llama3.gbv')).arrayBuffer());
    const fetchMs = performance.now() - t;
    const counter = new mod.Counter(bytes);
    return { count: (s) => counter.count(s), fetchMs };
  },
  async 'gpt-tokenizer'() {
    const mod = await import('/node_modules/gpt-tokenizer/esm/encoding/o200k_base.js');
    // Special-token look-alikes count as plain text, as in the other two.
    const asText = { disallowedSpecial: new Set() };
    return { count: (s) => mod.countTokens(s, asText) };
  },
  async tiktoken() {
    const mod = await import('/node_modules/tiktoken/lite/init.js');
    const wasm = await (await fetch('/node_modules/tiktoken/lite/tiktoken_bg.wasm')).arrayBuffer();
    await mod.init((imports) => WebAssembly.instantiate(wasm, imports));
    const model = await (await fetch('/node_modules/tiktoken/encoders/o200k_base.json')).json();
    const enc = new mod.Tiktoken(model.bpe_ranks, model.special_tokens, model.pat_str);
    return { count: (s) => enc.encode_ordinary(s).length };
  },
};

self.onmessage = async (event) => {
  const { contender, big, chat } = event.data;
  try {
    const started = performance.now();
    const tokenizer = await loaders[contender]();
    tokenizer.count('warm up');
    const readyMs = performance.now() - started;
    const bigMs = [];
    let bigTokens = 0;
    for (let i = 0; i < 4; i++) {
      const t = performance.now();
      bigTokens = tokenizer.count(big);
      bigMs.push(performance.now() - t);
    }
    const rounds = 200;
    let chatTokens = 0;
    const t = performance.now();
    for (let i = 0; i < rounds; i++) chatTokens = tokenizer.count(chat);
    const chatUs = ((performance.now() - t) * 1000) / rounds;
    const resources = performance.getEntriesByType('resource').map((e) => new URL(e.name).pathname);
    postMessage({ contender, readyMs, fetchMs: tokenizer.fetchMs ?? null, bigTokens, bigMs, chatTokens, chatUs, resources });
  } catch (err) {
    postMessage({ contender, error: String(err && err.stack || err) });
  }
};
