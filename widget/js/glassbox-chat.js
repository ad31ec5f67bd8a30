// <glassbox-chat>: the Glassbox chat widget as a custom element with an open shadow root.
//
//   <script type="module" src="https://YOUR-SERVER/widget/glassbox-chat.js"></script>
//   <glassbox-chat server="https://YOUR-SERVER" session="support" theme="auto"></glassbox-chat>
//
// Attributes, methods, events and ::part() names: glassbox-chat.d.ts (the types) and
// docs/embedding.md (the same as tables).
import { addPanelStyles, shadowRoot } from './shadow-shell.js';
import { Launcher, launcherPosition, launcherWords } from './launcher.js';

const here = new URL('.', import.meta.url);
// Served by a Glassbox server (…/widget/): that server, and its other files beside this one.
const servedByGlassbox = here.pathname.endsWith('/widget/');
const defaultServer = servedByGlassbox
  ? new URL('..', here).href.replace(/\/$/, '')
  : typeof location === 'undefined' ? '' : location.origin;

// The widget's code is fetched on first need: at once in inline mode, when the button is neared or
// the chat is used in launcher mode (glassbox-wasm.js loads it once, and again after a failure).
// The token worker starts with it, with the o200k vocabulary the chat counts with until the
// server names its model's.
function load(assets, vocab) {
  return import('./glassbox-wasm.js').then((m) => {
    const urls = m.tokenAssets(assets, vocab, 'o200k_base');
    m.startTokenWorker(urls.worker, urls.vocab);
    return m.loadGlassbox();
  });
}

// The attributes that make a different chat: a change remounts it (theme, mode and position apply
// in place).
const CHAT_ATTRIBUTES = [
  'server', 'session', 'agent', 'model', 'vocab', 'assets', 'file-link', 'applet-link', 'capture',
  'hide-context-values', 'user-id', 'user-hash', 'placeholder', 'welcome', 'starters',
];

// Without a DOM (server-side rendering imports this module too) there is nothing to define.
const Base = typeof HTMLElement === 'undefined' ? class {} : HTMLElement;

class GlassboxChat extends Base {
  static observedAttributes = [...CHAT_ATTRIBUTES, 'theme', 'mode', 'position', 'lang'];

  #widget = null;
  #mountedWith = null;
  #container = null;
  #pageContext = undefined;
  #mounting = null;
  #launcher = null;
  #strings = null;
  #pageLang = null;

  /** The host's own words over the widget's (key → string; docs/strings.md lists the keys);
   * `null` or `{}` clears them. Applied in place, without a remount. */
  get strings() {
    return this.#strings;
  }

  set strings(value) {
    this.#strings = value && typeof value === 'object' ? { ...value } : null;
    this.#applyWords();
    if (this.shadowRoot) this.#widget?.setStrings(this.#stringPairs());
  }

  connectedCallback() {
    // A `strings` set on the element before this script defined it hid the accessor: take it over.
    if (Object.prototype.hasOwnProperty.call(this, 'strings')) {
      const value = this.strings;
      delete this.strings;
      this.strings = value;
    }
    // The page's language, when it changes (a single-page app switching language).
    this.#pageLang ??= new MutationObserver(() => this.#applyWords());
    this.#pageLang.observe(document.documentElement, { attributes: true, attributeFilter: ['lang'] });
    if (!this.shadowRoot) {
      const root = shadowRoot(this);
      this.#container = document.createElement('div');
      this.#container.className = 'gb-host';
      // A page whose rules took the element's own display (`* { all: unset }` leaves it inline
      // with no height) gets a chat of usable height; a sized element keeps its size.
      root.querySelector('link')?.addEventListener('load', () => {
        this.#container.classList.toggle('gb-unsized', getComputedStyle(this).display === 'inline');
      });
    }
    this.#layout();
    // Moved under another language (a mounted chat stays mounted across a move).
    this.#applyWords();
  }

  disconnectedCallback() {
    // A page that moves the element (a framework re-parenting it on a route change) disconnects and
    // connects it again in one task: the chat stays mounted, with its socket, draft and panel.
    queueMicrotask(() => {
      if (this.isConnected) return;
      this.#pageLang?.disconnect();
      this.#unmount();
      this.#launcher?.destroy();
      this.#launcher = null;
    });
  }

  attributeChangedCallback(name, oldValue, newValue) {
    // While detached, changes are picked up when it connects again (#layout compares).
    if (oldValue === newValue || !this.shadowRoot || !this.isConnected) return;
    if (name === 'position') {
      this.#launcher?.setPosition(launcherPosition(newValue));
    } else if (name === 'theme') {
      this.#widget?.setTheme(newValue);
    } else if (name === 'lang') {
      this.#applyWords();
    } else {
      this.#layout();
    }
  }

  /** Sends a message; `context` is page data for the model, never shown in the message. */
  async sendMessage(text, attachments, context) {
    return this.#withChat((chat) => chat.sendMessage(String(text), attachments ?? null, context ?? null));
  }

  /** Uploads a `File` to the conversation; resolves to the attachment to pass to `sendMessage`. */
  async uploadFile(file) {
    return this.#withChat((chat) => chat.uploadFile(file));
  }

  /** Sets the page context sent with every later message; `null` clears it. Before the chat has
   * mounted it is kept for then (a closed launcher stays unloaded). */
  async setPageContext(context) {
    this.#pageContext = context ?? null;
    this.#widget?.setPageContext(this.#pageContext);
  }

  /** Changes one of the session's context sets (`mode`: 'replace' by default, or 'merge'). */
  async setContext(setName, items, mode) {
    return this.#withChat((chat) => chat.setContext(String(setName), items ?? [], mode ?? null));
  }

  /** Selects topics by label (empty clears the filter); `glassbox:filter-changed` follows. */
  async setFilter(labels) {
    return this.#withChat((chat) => chat.setFilter(Array.isArray(labels) ? labels.map(String) : []));
  }

  /** The session's topics and filter as last received: {topics, filter}. */
  async getTopics() {
    return this.#withChat((chat) => chat.getTopics());
  }

  /**
   * Switches similarity mode (off: topics are shown, the whole history goes); a threshold (0–1)
   * also sets the cosine a message needs to match a selected topic, `null` returns it to the
   * server's, leaving it out keeps it.
   */
  async setSimilarityMode(enabled, threshold) {
    const t = threshold === undefined || threshold === null ? threshold : Number(threshold);
    return this.#withChat((chat) => chat.setSimilarityMode(Boolean(enabled), t));
  }

  /** Pins ('pinned'), excludes ('excluded') or unmarks (null) a message by id. */
  async markMessage(messageId, mark) {
    return this.#withChat((chat) => chat.markMessage(String(messageId), mark ?? null));
  }

  /** The agent's items and the session's choices as last received, or null. */
  async getItems() {
    return this.#withChat((chat) => chat.getItems());
  }

  /** Adds one of the agent's items ({kind: 'rule' | 'reference', name}) to the session. */
  async addItem(item) {
    return this.#withChat((chat) => chat.addItem(item ?? null));
  }

  /**
   * Answers a tool call waiting for the user's yes (the `glassbox:approval` event's `approvalId`):
   * `decision` 'allow' | 'deny' | 'allow_session'; `reason` (for a denial) is told to the model.
   */
  async approve(approvalId, decision, reason) {
    return this.#withChat((chat) => chat.approve(String(approvalId ?? ''), String(decision ?? ''), reason ?? undefined));
  }

  /**
   * Stops a streaming reply (`messageId`, else the one streaming now): it ends `stopped` with its
   * text so far. Resolves to false when none was streaming. Not `close()`/removal, which end the
   * connection (its status is then `stopped`).
   */
  async stopReply(messageId) {
    return this.#withChat((chat) => chat.stopReply(messageId == null ? undefined : String(messageId)));
  }

  /** Removes an item ({kind, name}) from the session. */
  async removeItem(item) {
    return this.#withChat((chat) => chat.removeItem(item ?? null));
  }

  /** Replaces the session's overrides of the agent's defaults ({} clears them). */
  async setOverrides(overrides) {
    return this.#withChat((chat) => chat.setOverrides(overrides ?? {}));
  }

  /** The receipt a turn answering `text` would have now, without sending it. */
  async preview(text, attachments, context) {
    return this.#withChat((chat) => chat.preview(String(text), attachments ?? null, context ?? null));
  }

  /** Launcher mode: opens the panel (and loads the chat on first use). */
  async open() {
    if (this.#launcher) await this.#launcher.open();
  }

  /** Launcher mode: closes the panel; the conversation stays connected. */
  close() {
    this.#launcher?.close();
  }

  /** Whether the chat is showing: always in inline mode, while the panel is open in launcher mode. */
  get isOpen() {
    return this.#launcher ? this.#launcher.isOpen : this.isConnected;
  }

  /** Deletes this conversation on the server and starts a new one (the "New chat" control). */
  async clearSession() {
    return this.#withChat((chat) => chat.clearSession());
  }

  /** Brings the shadow root in line with the attributes. Inline: the container fills the element
   * and the chat mounts now. Launcher: a button and a panel around the container; the chat mounts
   * when opened or first used. A chat mounted for other attributes is remounted. */
  #layout() {
    const launcher = this.getAttribute('mode') === 'launcher';
    if (launcher && !this.#launcher) {
      this.#launcher = new Launcher(this, this.shadowRoot, this.#container, {
        position: launcherPosition(this.getAttribute('position')),
        storageKey: () => `glassbox:launcher:${this.#server()}:${this.getAttribute('session') || 'default'}:${
          this.getAttribute('agent') || ''}:${location.pathname}`,
        onOpen: () => this.#mount(),
        words: launcherWords(this.#lang(), this.#strings),
        onPrefetch: () => load(this.#assets(), this.getAttribute('vocab')).catch(() => {}),
      });
    } else if (!launcher && this.#launcher) {
      this.#launcher.destroy();
      this.#launcher = null;
    }
    if (!launcher && this.#container.parentNode !== this.shadowRoot) this.shadowRoot.append(this.#container);
    if (this.#widget && this.#mountedWith !== this.#identity()) this.#unmount();
    if (!launcher || this.#widget || this.#launcher.isOpen) this.#mount().catch(() => {});
  }

  /** The language of the widget's strings: the element's `lang`, else the nearest ancestor's,
   * across the shadow roots it sits in (else the page's). */
  #lang() {
    for (let node = this; node; ) {
      const found = node.closest('[lang]');
      if (found) return found.getAttribute('lang') || null;
      const root = node.getRootNode();
      node = root instanceof ShadowRoot ? root.host : null;
    }
    return null;
  }

  /** The `strings` property's string values as `[key, string]` pairs (others warned of). */
  #stringPairs() {
    const pairs = [];
    for (const [key, value] of Object.entries(this.#strings ?? {})) {
      // The launcher's own words are read by launcher.js.
      if (key.startsWith('launcher_')) continue;
      if (typeof value === 'string') pairs.push([key, value]);
      else console.warn(`<glassbox-chat>.strings.${key}: not a string; left out`);
    }
    return pairs;
  }

  /** Shows the language now chosen, on the launcher with the host's words and in the chat. */
  #applyWords() {
    if (!this.shadowRoot) return;
    this.#launcher?.setWords(launcherWords(this.#lang(), this.#strings));
    this.#widget?.setLanguage(this.#lang());
  }

  /** The `starters` attribute: a JSON array of strings (anything else: none, with a warning). */
  #starters() {
    const raw = this.getAttribute('starters');
    if (!raw || !raw.trim()) return [];
    try {
      const list = JSON.parse(raw);
      if (Array.isArray(list) && list.every((s) => typeof s === 'string')) return list;
    } catch {
      // Warned below.
    }
    console.warn('<glassbox-chat starters>: not a JSON array of strings; no starters');
    return [];
  }

  #server() {
    return this.getAttribute('server') || defaultServer;
  }

  /** What makes this chat this chat (CHAT_ATTRIBUTES' values). */
  #identity() {
    return JSON.stringify(CHAT_ATTRIBUTES.map((name) => this.getAttribute(name)));
  }

  /** Runs `action` on the mounted chat (mounting it first); what it returns is returned. */
  async #withChat(action) {
    await this.#mount();
    if (!this.#widget) throw new Error('<glassbox-chat> is not in the document');
    return action(this.#widget);
  }

  /** The token worker and vocabularies: beside this script on a Glassbox server, else the
   * server's own (a bundler copies only the files its code names). */
  #assets() {
    return this.getAttribute('assets') || (servedByGlassbox ? here.href : `${this.#server()}/widget/`);
  }

  /** Mounts the chat (loading the wasm first). A failure to load is told to the page as a
   * `glassbox:error` and rejects; the next call tries again. */
  #mount() {
    if (this.#widget) return Promise.resolve();
    this.#mounting ??= load(this.#assets(), this.getAttribute('vocab'))
      .then(({ GlassboxWidget }) => {
        if (this.#widget || !this.isConnected) return;
        const server = this.#server();
        this.#widget = new GlassboxWidget(this, this.#container, {
          server,
          session: this.getAttribute('session') || 'default',
          agent: this.getAttribute('agent') || null,
          model: this.getAttribute('model') || null,
          theme: this.getAttribute('theme') || 'auto',
          assets: this.#assets(),
          vocab: this.getAttribute('vocab') || null,
          fileLink: this.getAttribute('file-link'),
          appletLink: this.getAttribute('applet-link'),
          capture: this.getAttribute('capture'),
          hideContextValues: this.hasAttribute('hide-context-values'),
          userId: this.getAttribute('user-id') || null,
          userHash: this.getAttribute('user-hash') || null,
          placeholder: this.getAttribute('placeholder'),
          welcome: this.getAttribute('welcome'),
          starters: this.#starters(),
          lang: this.#lang(),
        });
        // Before the first paint: the chat stays hidden until they are read.
        const strings = this.#stringPairs();
        if (strings.length) this.#widget.setStrings(strings);
        this.#mountedWith = this.#identity();
        addPanelStyles(this.shadowRoot);
        if (this.#pageContext !== undefined) {
          try {
            this.#widget.setPageContext(this.#pageContext);
          } catch (e) {
            this.#report(e?.code ?? 'context_invalid', `page context: ${e?.message ?? e}`, false);
          }
        }
      })
      .catch((e) => {
        this.#report(e?.code ?? 'internal', `the chat could not start: ${e?.message ?? e}`, true);
        throw e;
      })
      .finally(() => {
        this.#mounting = null;
      });
    return this.#mounting;
  }

  /** Tells the page of an error the element met by itself (a `glassbox:error`). */
  #report(code, message, retryable) {
    this.dispatchEvent(
      new CustomEvent('glassbox:error', { detail: { code, message, retryable }, bubbles: true, composed: true }),
    );
  }

  #unmount() {
    if (this.#widget) {
      this.#widget.unmount();
      this.#widget.free();
      this.#widget = null;
      this.#mountedWith = null;
    }
  }
}

if (typeof customElements !== 'undefined' && !customElements.get('glassbox-chat')) {
  customElements.define('glassbox-chat', GlassboxChat);
}
