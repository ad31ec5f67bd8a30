// <glassbox-token-meter>: the Glassbox token meter on its own, in any page, with no server.
//
//   <script type="module" src="https://YOUR-HOST/widget/glassbox-token-meter.js"></script>
//   <textarea id="prompt"></textarea>
//   <glassbox-token-meter model="gpt-4o" for="prompt"></glassbox-token-meter>
//
// Attributes: model (sets the window and the vocabulary; default gpt-4o), limit (window override),
// output-reserve, compression (off | hybrid | summarize | drop-low-value | sliding-window: preview),
// compact, assets (the folder of the token worker and vocabularies; default: beside this script, so
// an app that bundles this file points it at a Glassbox server's /widget/ or a copy of its files),
// vocab (vocabulary URL with {encoding}; default {assets}vocab/{encoding}.gbv),
// for (id of a textarea or input in the page whose text is counted as you type).
// Methods: setText(text), setMessages([text, ...]), setSystemPrompt(text), reading().
// Events: "glassbox:meter" (detail: {used, limit, percent, state, estimated, originalPercent, ...}).
// Counting runs in a Web Worker, started while the wasm loads; the vocabulary is cached by the browser.
import { shadowContainer } from './shadow-shell.js';
import { startTokenWorker, tokenAssets } from './token-worker-start.js';

const here = new URL('.', import.meta.url);

// Without a DOM (server-side rendering imports this module too) there is nothing to define.
const Base = typeof HTMLElement === 'undefined' ? class {} : HTMLElement;

class TokenMeterElement extends Base {
  static observedAttributes = ['model', 'limit', 'output-reserve', 'compression', 'compact', 'vocab', 'assets', 'for'];

  #meter = null;
  #container = null;
  #mounting = null;
  #source = null;
  #onInput = () => this.setText(this.#source ? this.#source.value : '');
  #pending = [];

  connectedCallback() {
    if (!this.shadowRoot) this.#container = shadowContainer(this, 'gb-host gb-meter-host');
    this.#mount();
  }

  disconnectedCallback() {
    this.#watch(null);
    if (this.#meter) {
      this.#meter.unmount();
      this.#meter.free();
      this.#meter = null;
    }
  }

  attributeChangedCallback(name, oldValue, newValue) {
    if (oldValue === newValue || !this.#meter) return;
    if (name === 'for') this.#watch(newValue);
    else if (name === 'vocab' || name === 'assets') { this.disconnectedCallback(); this.#mount(); }
    else this.#meter.configure(this.#options());
  }

  /** Counts `text` as the whole conversation. */
  setText(text) { this.#call((m) => m.setText(String(text))); }
  /** Counts each string as one chat message. */
  setMessages(messages) { this.#call((m) => m.setMessages(Array.from(messages, String))); }
  /** Counts `text` as the system prompt. */
  setSystemPrompt(text) { this.#call((m) => m.setSystemPrompt(String(text))); }
  /** The current reading, or null before any text. */
  reading() { return this.#meter ? this.#meter.reading() : null; }

  #call(f) {
    if (this.#meter) f(this.#meter);
    else this.#pending.push(f);
  }

  #options() {
    const number = (name) => (this.hasAttribute(name) ? Number(this.getAttribute(name)) : null);
    return {
      assets: this.getAttribute('assets') || here.href,
      vocab: this.getAttribute('vocab') || null,
      model: this.getAttribute('model') || null,
      limit: number('limit'),
      outputReserve: number('output-reserve'),
      compression: this.getAttribute('compression') || null,
      compact: this.hasAttribute('compact'),
    };
  }

  #watch(id) {
    if (this.#source) this.#source.removeEventListener('input', this.#onInput);
    this.#source = id ? document.getElementById(id) : null;
    if (this.#source) {
      this.#source.addEventListener('input', this.#onInput);
      this.#onInput();
    }
  }

  #mount() {
    if (this.#meter || this.#mounting) return this.#mounting;
    // The wasm loads when the first meter mounts, not when the script is imported; the token
    // worker starts meanwhile, with the vocabulary of the default model (gpt-4o: o200k) when no
    // model is named (the wasm maps a named one, and has the page download its vocabulary).
    const options = this.#options();
    const urls = tokenAssets(options.assets, options.vocab, options.model ? null : 'o200k_base');
    startTokenWorker(urls.worker, urls.vocab);
    // Imported when a meter mounts, so a page that defines the element and shows no meter loads
    // none of it; the glue is named too, so it downloads beside meter-wasm.js, not after it.
    this.#mounting = Promise.all([import('./meter-wasm.js'), import('./glassbox_meter.js')])
      .then(([m]) => m.loadMeter())
      .then(({ GlassboxTokenMeter }) => {
        if (this.#meter || !this.isConnected) return;
        this.#meter = new GlassboxTokenMeter(this, this.#container, this.#options());
        for (const f of this.#pending.splice(0)) f(this.#meter);
        this.#watch(this.getAttribute('for'));
      })
      .finally(() => { this.#mounting = null; });
    return this.#mounting;
  }
}

if (typeof customElements !== 'undefined' && !customElements.get('glassbox-token-meter')) {
  customElements.define('glassbox-token-meter', TokenMeterElement);
}
