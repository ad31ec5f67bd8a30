// Loads the chat's WebAssembly once for every chat entry point: <glassbox-chat> and the React
// hook. `loadGlassbox()` resolves to the module's exports (GlassboxWidget, GlassboxClient). The
// wasm is found beside this file unless `wasm` (a URL, a Response or the bytes) is given, which
// only the first call can do. <glassbox-token-meter> has a module of its own (meter-wasm.js).
import init, * as widget from './glassbox_widget.js';

export { startTokenWorker, tokenAssets } from './token-worker-start.js';

let ready = null;

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
