// <glassbox-chat>: the Glassbox chat widget as a custom element with an open shadow root.
//
//   <script type="module" src="https://YOUR-SERVER/widget/glassbox-chat.js"></script>
//   <glassbox-chat server="https://YOUR-SERVER" session="support" theme="auto"></glassbox-chat>
//
// Attributes, methods, events and ::part() names: glassbox-chat.d.ts (the types) and
// docs/embedding.md (the same as tables).
import { shadowRoot } from './shadow-shell.js';
import { Launcher, launcherPosition } from './launcher.js';

const here = new URL('.', import.meta.url);
// The widget's code is fetched on first need: at once in inline mode, when the button is neared or
// the chat is used in launcher mode.
let loading = null;
function load() {
  loading ??= import('./glassbox-wasm.js').then((m) => m.loadGlassbox());
  return loading;
}
// Served by a Glassbox server (…/widget/): that server. From a package or a CDN: the page's origin.
const defaultServer = here.pathname.endsWith('/widget/')
  ? new URL('..', here).href.replace(/\/$/, '')
  : location.origin;

class GlassboxChat extends HTMLElement {
  static observedAttributes = [
    'server', 'session', 'agent', 'model', 'theme', 'vocab', 'file-link', 'applet-link', 'capture',
    'hide-context-values', 'mode', 'position',
  ];

  #widget = null;
  #container = null;
  #pageContext = undefined;
  #mounting = null;
  #launcher = null;

  connectedCallback() {
    if (!this.shadowRoot) {
      shadowRoot(this);
      this.#container = document.createElement('div');
      this.#container.className = 'gb-host';
    }
    this.#layout();
  }

  disconnectedCallback() {
    // A page that moves the element (a framework re-parenting it on a route change) disconnects and
    // connects it again in one task: the chat stays mounted, with its socket, draft and panel.
    queueMicrotask(() => {
      if (this.isConnected) return;
      this.#unmount();
      this.#launcher?.destroy();
      this.#launcher = null;
    });
  }

  attributeChangedCallback(name, oldValue, newValue) {
    if (oldValue === newValue || !this.shadowRoot || !this.isConnected) return;
    if (name === 'position') {
      this.#launcher?.setPosition(launcherPosition(newValue));
    } else if (name === 'mode') {
      this.#unmount();
      this.#launcher?.destroy();
      this.#launcher = null;
      this.#layout();
    } else if (!this.#widget) {
      // Read when mounting.
    } else if (name === 'theme') {
      this.#widget.setTheme(newValue);
    } else {
      // A different server, session slot, agent or model is a different conversation; the other
      // attributes are read when mounting.
      this.#unmount();
      this.#mount();
    }
  }

  /** Sends a message; `context` is page data for the model, never shown in the message. */
  async sendMessage(text, attachments, context) {
    await this.#mount();
    this.#live().sendMessage(String(text), attachments ?? null, context ?? null);
  }

  /** Sets the page context sent with every later message; `null` clears it. */
  async setPageContext(context) {
    this.#pageContext = context ?? null;
    await this.#mount();
    this.#live().setPageContext(this.#pageContext);
  }

  /** Changes one of the session's context sets (`mode`: 'replace' by default, or 'merge'). */
  async setContext(setName, items, mode) {
    await this.#mount();
    this.#live().setContext(String(setName), items ?? [], mode ?? null);
  }

  /** Selects topics by label (empty clears the filter); `glassbox:filter-changed` follows. */
  async setFilter(labels) {
    await this.#mount();
    this.#live().setFilter(Array.isArray(labels) ? labels.map(String) : []);
  }

  /** The session's topics and filter as last received: {topics, filter}. */
  async getTopics() {
    await this.#mount();
    return this.#live().getTopics();
  }

  /**
   * Switches similarity mode (off: topics are shown, the whole history goes); a threshold (0–1)
   * also sets the cosine a message needs to match a selected topic, `null` returns it to the
   * server's, leaving it out keeps it.
   */
  async setSimilarityMode(enabled, threshold) {
    await this.#mount();
    const t = threshold === undefined || threshold === null ? threshold : Number(threshold);
    this.#live().setSimilarityMode(Boolean(enabled), t);
  }

  /** Pins ('pinned'), excludes ('excluded') or unmarks (null) a message by id. */
  async markMessage(messageId, mark) {
    await this.#mount();
    this.#live().markMessage(String(messageId), mark ?? null);
  }

  /** The agent's items and the session's choices as last received, or null. */
  async getItems() {
    await this.#mount();
    return this.#live().getItems();
  }

  /** Adds one of the agent's items ({kind: 'rule' | 'reference', name}) to the session. */
  async addItem(item) {
    await this.#mount();
    this.#live().addItem(item ?? null);
  }

  /** Removes an item ({kind, name}) from the session. */
  async removeItem(item) {
    await this.#mount();
    this.#live().removeItem(item ?? null);
  }

  /** Replaces the session's overrides of the agent's defaults ({} clears them). */
  async setOverrides(overrides) {
    await this.#mount();
    this.#live().setOverrides(overrides ?? {});
  }

  /** The receipt a turn answering `text` would have now, without sending it. */
  async preview(text, attachments, context) {
    await this.#mount();
    return this.#live().preview(String(text), attachments ?? null, context ?? null);
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
    await this.#mount();
    this.#live().clearSession();
  }

  /** Inline: the container fills the element and the chat mounts now. Launcher: a button and a
   * panel around the container; the chat mounts when opened or first used. */
  #layout() {
    if (this.getAttribute('mode') === 'launcher') {
      this.#launcher ??= new Launcher(this, this.shadowRoot, this.#container, {
        position: launcherPosition(this.getAttribute('position')),
        storageKey: `glassbox:launcher:${location.pathname}:${this.getAttribute('session') || 'default'}`,
        onOpen: () => this.#mount(),
        onPrefetch: () => load(),
      });
    } else {
      this.shadowRoot.append(this.#container);
      this.#mount();
    }
  }

  #live() {
    if (!this.#widget) throw new Error('<glassbox-chat> is not in the document');
    return this.#widget;
  }

  #mount() {
    if (this.#widget) return Promise.resolve();
    if (!this.#mounting) {
      this.#mounting = load().then(({ GlassboxWidget }) => {
        if (this.#widget || !this.isConnected) return;
        this.#widget = new GlassboxWidget(this, this.#container, {
          server: this.getAttribute('server') || defaultServer,
          session: this.getAttribute('session') || 'default',
          agent: this.getAttribute('agent') || null,
          model: this.getAttribute('model') || null,
          theme: this.getAttribute('theme') || 'auto',
          assets: here.href,
          vocab: this.getAttribute('vocab') || null,
          fileLink: this.getAttribute('file-link'),
          appletLink: this.getAttribute('applet-link'),
          capture: this.getAttribute('capture'),
          hideContextValues: this.hasAttribute('hide-context-values'),
        });
        if (this.#pageContext !== undefined) this.#widget.setPageContext(this.#pageContext);
      }).finally(() => { this.#mounting = null; });
    }
    return this.#mounting;
  }

  #unmount() {
    if (this.#widget) {
      this.#widget.unmount();
      this.#widget.free();
      this.#widget = null;
    }
  }
}

if (!customElements.get('glassbox-chat')) {
  customElements.define('glassbox-chat', GlassboxChat);
}
