// Loads the WebAssembly of <glassbox-token-meter> once per page: the meter alone, without the
// chat (glassbox-wasm.js). `loadMeter()` resolves to the module's exports (GlassboxTokenMeter).
// The wasm is found beside this file unless `wasm` (a URL, a Response or the bytes) is given,
// which only the first call can do.
import init, * as meter from './glassbox_meter.js';

let ready = null;

export function loadMeter(wasm) {
  ready ??= init({ module_or_path: wasm ?? new URL('./glassbox_meter_bg.wasm', import.meta.url) }).then(
    () => meter,
    (error) => {
      ready = null; // a failed load (a network error) is tried again by the next call
      throw error;
    },
  );
  return ready;
}
