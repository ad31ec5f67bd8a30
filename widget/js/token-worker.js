// The token-counting Web Worker. Messages in:
//   {type: 'load', url}                    fetch a .gbv vocabulary (HTTP-cached) and build the tokenizer
//   {type: 'count', id, keys, texts}       count texts; answers {type: 'counts', id, keys, counts}
// Messages out: {type: 'ready', encoding, size, fetchMs, buildMs, transferBytes} | {type: 'error', message}
import init, { Counter } from './glassbox_token_worker.js';

const ready = init({ module_or_path: new URL('glassbox_token_worker_bg.wasm', import.meta.url) });
let counter = null;

async function load(url) {
  await ready;
  const started = performance.now();
  const response = await fetch(url);
  if (!response.ok) throw new Error(`vocabulary ${url}: HTTP ${response.status}`);
  const bytes = new Uint8Array(await response.arrayBuffer());
  const fetched = performance.now();
  const next = new Counter(bytes);
  const built = performance.now();
  if (counter) counter.free();
  counter = next;
  // transferSize is 0 when the browser cache answered: the second load costs no bytes.
  const timing = performance.getEntriesByName(response.url, 'resource').pop();
  postMessage({
    type: 'ready',
    url,
    encoding: counter.encoding(),
    size: counter.size(),
    fetchMs: fetched - started,
    buildMs: built - fetched,
    transferBytes: timing ? timing.transferSize : null,
  });
}

self.onmessage = (event) => {
  const message = event.data;
  if (message.type === 'load') {
    load(message.url).catch((err) => postMessage({ type: 'error', url: message.url, message: String(err && err.message || err) }));
  } else if (message.type === 'count') {
    if (!counter) {
      postMessage({ type: 'error', message: 'count before the vocabulary was loaded' });
      return;
    }
    const counts = message.texts.map((text) => counter.count(text));
    postMessage({ type: 'counts', id: message.id, keys: message.keys, counts });
  }
};
