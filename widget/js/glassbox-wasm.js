// Loads the widget's WebAssembly once for every entry point: both elements and the React hook.
// `loadGlassbox()` resolves to the module's exports (GlassboxWidget, GlassboxTokenMeter,
// GlassboxClient). The wasm is found beside this file unless `wasm` (a URL, a Response or the
// bytes) is given, which only the first call can do.
import init, * as widget from './glassbox_widget.js';

let ready = null;

/**
 * Starts the token worker while the wasm compiles, with the vocabulary at `vocabUrl` (none: the
 * wasm asks for one): the wasm takes it over (app/src/token_counts.rs) instead of starting its own
 * after first paint, so the first exact count does not wait for the wasm and then the worker. One
 * per page and worker URL until taken; a page without workers gets its worker from the wasm.
 */
export function startTokenWorker(workerUrl, vocabUrl) {
  if (typeof Worker === 'undefined' || typeof Blob === 'undefined') return;
  const pool = (globalThis[Symbol.for('glassbox.tokenWorkers')] ??= new Map());
  if (pool.has(workerUrl)) return;
  try {
    // A blob module that imports the worker, as the wasm starts it: cross-origin hosts work.
    const source = new Blob([`import ${JSON.stringify(workerUrl)};`], { type: 'text/javascript' });
    const worker = new Worker(URL.createObjectURL(source), { type: 'module' });
    const early = { worker, vocabUrl: vocabUrl ?? null, messages: [] };
    worker.onmessage = (event) => early.messages.push(event.data);
    // A worker a Content-Security-Policy refuses fails with an event: the wasm reports it.
    worker.onerror = () => early.messages.push({ type: 'error', message: 'the token worker could not start' });
    if (vocabUrl) worker.postMessage({ type: 'load', url: vocabUrl });
    pool.set(workerUrl, early);
    // Not taken (the element left, the wasm failed to load): not kept.
    setTimeout(() => {
      if (pool.get(workerUrl) === early) {
        pool.delete(workerUrl);
        worker.terminate();
      }
    }, 30_000);
  } catch {
    // Refused at once: the wasm starts its own, and reports a failure.
  }
}

/** The token worker's URL and the vocabulary URL of `encoding` for an element's `assets` and
 * `vocab` attributes, as the wasm makes them (app/src/config.rs). */
export function tokenAssets(assets, vocab, encoding) {
  const base = assets.replace(/\/+$/, '');
  return {
    worker: `${base}/token-worker.js`,
    vocab: encoding ? (vocab || `${base}/vocab/{encoding}.gbv`).replaceAll('{encoding}', encoding) : null,
  };
}

export function loadGlassbox(wasm) {
  ready ??= init({ module_or_path: wasm ?? new URL('./glassbox_widget_bg.wasm', import.meta.url) }).then(
    () => widget,
    (error) => {
      ready = null; // a failed load (a network error) is tried again by the next call
      throw error;
    },
  );
  return ready;
}
