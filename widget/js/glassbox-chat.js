// <glassbox-chat>: the Glassbox chat widget as a custom element with an open shadow root.
//
//   <script type="module" src="https://YOUR-SERVER/widget/glassbox-chat.js"></script>
//   <glassbox-chat server="https://YOUR-SERVER" session="support" theme="auto"></glassbox-chat>
//
// Attributes: server (defaults to the origin this script came from), session (names the conversation
// slot kept in localStorage), agent (one the server configures; its first when absent; each agent
// keeps its own conversation in the slot), model, theme (light | dark | auto), vocab (token vocabulary URL with
// {encoding}; defaults to vocab/{encoding}.gbv beside this script), file-link and applet-link (the
// context footer's link templates with {path}, or {slug} and {params}; "none" for no links), capture
// (the idle URL capture: "off", "PARAM" or "PARAM:SET"; default "applet"), hide-context-values
// (present: "View context" shows page-context key names only, never their values).
// Methods: sendMessage(text, attachments?, context?), setPageContext(obj), setContext(setName, items, mode?),
// clearSession() (deletes the conversation on the server and starts a new one), setFilter(labels),
// getTopics(), setSimilarityMode(enabled, threshold? | null), markMessage(messageId, 'pinned' | 'excluded' | null),
// getItems() ({agent, available, session, defaults, overrides} or null), addItem({kind, name}),
// removeItem({kind, name}), setOverrides(overrides), preview(text, attachments?, context?) (a promise
// of the receipt the message would get now, planned without sending it).
// Events: "glassbox:reply" (detail: the finished reply message), "glassbox:context" (the session's
// context sets: {reason, context, setName?}), "glassbox:filter-changed" (detail: {messageIds, labels,
// orphaned, renamed, total, status}: the messages the topic filter lets through, selected labels whose
// topic vanished, and [{from, to}] for selected topics a regeneration renamed; bubbles up to document).
// Parts for ::part(): root, header, meter, topics, drawer, notice, messages, message, preview,
// composer, input, send, footer, context-dialog.
import { shadowContainer } from './shadow-shell.js';
import init, { GlassboxWidget } from './glassbox_widget.js';

const here = new URL('.', import.meta.url);
const ready = init({ module_or_path: new URL('glassbox_widget_bg.wasm', here) });
const defaultServer = new URL('..', here).href.replace(/\/$/, '');

class GlassboxChat extends HTMLElement {
  static observedAttributes = [
    'server', 'session', 'agent', 'model', 'theme', 'vocab', 'file-link', 'applet-link', 'capture',
    'hide-context-values',
  ];

  #widget = null;
  #container = null;
  #pageContext = undefined;
  #mounting = null;

  connectedCallback() {
    if (!this.shadowRoot) this.#container = shadowContainer(this, 'gb-host');
    this.#mount();
  }

  disconnectedCallback() {
    this.#unmount();
  }

  attributeChangedCallback(name, oldValue, newValue) {
    if (oldValue === newValue || !this.#widget) return;
    if (name === 'theme') {
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

  /** Deletes this conversation on the server and starts a new one (the "New chat" control). */
  async clearSession() {
    await this.#mount();
    this.#live().clearSession();
  }

  #live() {
    if (!this.#widget) throw new Error('<glassbox-chat> is not in the document');
    return this.#widget;
  }

  #mount() {
    if (this.#widget) return Promise.resolve();
    if (!this.#mounting) {
      this.#mounting = ready.then(() => {
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
