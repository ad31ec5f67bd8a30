// Starts the token worker from the page while a wasm module compiles: shared by the chat's
// (glassbox-wasm.js) and the meter's (meter-wasm.js) loaders, and importing neither.

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
    if (vocabUrl) loadVocabulary(worker, vocabUrl);
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

/**
 * Has `worker` load the vocabulary at `url`, downloaded here while the worker starts (a worker
 * takes tens of milliseconds to run its first line) and handed over without a copy. A failed
 * download is left to the worker, which fetches again and reports the error.
 */
function loadVocabulary(worker, url) {
  const started = performance.now();
  // `early`: the worker drops it if the widget has asked for a vocabulary meanwhile.
  fetch(url)
    .then(async (response) => {
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const bytes = await response.arrayBuffer();
      // 0 when the browser cache answered.
      const timing = performance.getEntriesByName(response.url, 'resource').pop();
      const transferBytes = timing ? timing.transferSize : null;
      const fetchMs = performance.now() - started;
      worker.postMessage({ type: 'load', url, bytes, transferBytes, fetchMs, early: true }, [bytes]);
    })
    .catch(() => worker.postMessage({ type: 'load', url, early: true }));
}

/** The token worker's URL and the vocabulary URL of `encoding` for an element's `assets` and
 * `vocab` attributes, as the wasm makes them (app/src/config.rs, app/src/token_counts.rs):
 * absolute, as a blob worker cannot resolve a path relative to the page. */
export function tokenAssets(assets, vocab, encoding) {
  const base = assets.replace(/\/+$/, '');
  const vocabUrl = encoding && (vocab || `${base}/vocab/{encoding}.gbv`).replaceAll('{encoding}', encoding);
  return { worker: absolute(`${base}/token-worker.js`), vocab: vocabUrl ? absolute(vocabUrl) : null };
}

/** `url` resolved against the page's base URL; as given when it is not a URL (the wasm tries it
 * and reports the failure). */
function absolute(url) {
  try {
    return new URL(url, document.baseURI).href;
  } catch {
    return url;
  }
}
