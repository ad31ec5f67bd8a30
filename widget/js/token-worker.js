// The token-counting Web Worker. Messages in:
//   {type: 'load', url, bytes?, transferBytes?, fetchMs?, early?}
//                                          build the tokenizer from the .gbv vocabulary at `url`: from
//                                          `bytes` (an ArrayBuffer the page downloaded while this worker
//                                          started) or fetched here (HTTP-cached); the URL being loaded
//                                          or loaded last is not loaded again; an `early` load (the
//                                          page's guess) is ignored once the widget has asked for one
//   {type: 'count', id, keys, texts}       count texts; answers {type: 'counts', id, encoding, keys,
//                                          counts}, `encoding` the vocabulary that counted them (a
//                                          count asked before a model change can be answered after)
// Messages out: {type: 'ready', encoding, size, fetchMs, buildMs, transferBytes} | {type: 'error', message}
// tiktoken vocabularies run in the small module; Hugging Face tokenizers (kind byte 2 of the .gbv
// header) in the larger one with the `tokenizers` crate, fetched only when such a model is used.
const modules = {};

function counterModule(huggingFace) {
  const name = huggingFace ? 'glassbox_token_worker_hf' : 'glassbox_token_worker';
  if (!modules[name]) {
    modules[name] = import(`./${name}.js`).then(async (mod) => {
      await mod.default({ module_or_path: new URL(`${name}_bg.wasm`, import.meta.url) });
      return mod;
    });
  }
  return modules[name];
}
counterModule(false); // start compiling the common module while the vocabulary downloads

let counter = null;
// Loads may overlap (an early guess, then the model's own): only the latest one sets the counter.
let latest = 0;
// The URL of the latest load, and its `ready` once sent.
let current = { url: null, ready: null };
// The page's guess (a load marked `early`, sent when its download ends) counts only until the
// widget asks for a vocabulary itself: arriving later, it would replace the one the widget wants.
let widgetAsked = false;

async function load(message) {
  const { url, early } = message;
  if (early && widgetAsked) return;
  if (!early) widgetAsked = true;
  if (url === current.url) {
    // Asked again (the widget takes over a worker the page started): answered once it is built.
    if (current.ready) postMessage(current.ready);
    return;
  }
  const mine = ++latest;
  current = { url, ready: null };
  try {
    const started = performance.now();
    let bytes;
    let transferBytes = message.transferBytes ?? null;
    if (message.bytes) {
      bytes = new Uint8Array(message.bytes);
    } else {
      const response = await fetch(url);
      if (!response.ok) throw new Error(`vocabulary ${url}: HTTP ${response.status}`);
      bytes = new Uint8Array(await response.arrayBuffer());
      // transferSize is 0 when the browser cache answered: the second load costs no bytes.
      const timing = performance.getEntriesByName(response.url, 'resource').pop();
      transferBytes = timing ? timing.transferSize : null;
    }
    const fetched = performance.now();
    const mod = await counterModule(bytes[4] === 2);
    const next = new mod.Counter(bytes);
    const built = performance.now();
    if (mine !== latest) {
      next.free();
      return;
    }
    if (counter) counter.free();
    counter = next;
    current.ready = {
      type: 'ready',
      url,
      encoding: counter.encoding(),
      size: counter.size(),
      // The page's download when it sent the bytes.
      fetchMs: message.fetchMs ?? fetched - started,
      buildMs: built - fetched,
      transferBytes,
    };
    postMessage(current.ready);
  } catch (err) {
    // A load overtaken by another is not reported; asked again, the URL is loaded again.
    if (mine !== latest) return;
    current = { url: null, ready: null };
    postMessage({ type: 'error', url, message: String((err && err.message) || err) });
  }
}

self.onmessage = (event) => {
  const message = event.data;
  if (message.type === 'load') {
    load(message);
  } else if (message.type === 'count') {
    if (!counter) {
      postMessage({ type: 'error', message: 'count before the vocabulary was loaded' });
      return;
    }
    const counts = message.texts.map((text) => counter.count(text));
    postMessage({ type: 'counts', id: message.id, encoding: counter.encoding(), keys: message.keys, counts });
  }
};
