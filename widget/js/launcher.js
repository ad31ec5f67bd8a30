// Launcher mode of <glassbox-chat>: a floating button that opens the chat as an overlay panel
// (full-screen below 480 px). The panel remembers being open per page, Esc closes it and focus
// goes back to the button, and replies that arrive while it is closed show as an unread badge.
// Everything is built with DOM calls and classes: no inline styles or markup, so a strict
// Content-Security-Policy needs nothing extra.

const POSITIONS = ['bottom-right', 'bottom-left', 'top-right', 'top-left'];
const SVG = 'http://www.w3.org/2000/svg';

/** `value` if it is a known position, else the default (bottom-right). */
export function launcherPosition(value) {
  return POSITIONS.includes(value) ? value : 'bottom-right';
}

/** The chat bubble icon, as SVG elements. */
function bubbleIcon() {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('class', 'gb-launcher-icon');
  const path = document.createElementNS(SVG, 'path');
  path.setAttribute('d', 'M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2z');
  svg.append(path);
  return svg;
}

function element(tag, className, attributes = {}) {
  const el = document.createElement(tag);
  el.className = className;
  for (const [name, value] of Object.entries(attributes)) el.setAttribute(name, value);
  return el;
}

// The launcher's words. It shows before the chat's code loads, so they live here rather than in
// the chat's table (docs/strings.md lists both): English, French, and the host's `strings` over
// them.
const WORDS = {
  en: {
    launcher_open: 'Open chat',
    launcher_unread_one: 'Open chat ({count} unread reply)',
    launcher_unread_many: 'Open chat ({count} unread replies)',
    launcher_title: 'Chat',
    launcher_close: 'Close chat',
  },
  fr: {
    launcher_open: 'Ouvrir la discussion',
    launcher_unread_one: 'Ouvrir la discussion ({count} réponse non lue)',
    launcher_unread_many: 'Ouvrir la discussion ({count} réponses non lues)',
    launcher_title: 'Discussion',
    launcher_close: 'Fermer la discussion',
  },
};

/** The launcher's words for the language tag `lang` (French for `fr…`, else English), with the
 * host's own (`strings`, key → string) over them. */
export function launcherWords(lang, strings) {
  const base = /^fr(?:[-_]|$)/i.test(lang ?? '') ? WORDS.fr : WORDS.en;
  const words = { ...base };
  for (const key of Object.keys(base)) {
    if (typeof strings?.[key] === 'string') words[key] = strings[key];
  }
  return words;
}

/** Below this width the panel fills the screen and is modal (focus stays inside it). */
const FULL_SCREEN = '(max-width: 479.98px)';

/** What Tab can reach inside `panel`, in order. */
function focusables(panel) {
  return [...panel.querySelectorAll('button, textarea, input, select, a[href], summary, [tabindex]')].filter(
    (el) => !el.disabled && el.tabIndex >= 0 && el.getClientRects().length > 0,
  );
}

/**
 * The button, the panel around `container` and their behaviour, in `root` (the shadow root).
 * `options.onOpen` runs when the panel opens (the element mounts the chat there);
 * `options.storageKey()` names where open/closed is remembered.
 */
export class Launcher {
  #host;
  #root;
  #button;
  #badge;
  #panel;
  #container;
  #options;
  #open = false;
  #unread = 0;
  #listeners = [];
  #title;
  #close;
  #words = launcherWords(null, null);

  constructor(host, root, container, options) {
    this.#host = host;
    this.#root = root;
    this.#container = container;
    this.#options = options;
    const position = launcherPosition(options.position);

    this.#button = element('button', 'gb-launcher', {
      type: 'button',
      part: 'launcher',
      'data-position': position,
      'aria-haspopup': 'dialog',
      'aria-expanded': 'false',
      'aria-controls': 'gb-panel',
    });
    this.#badge = element('span', 'gb-launcher-badge', { part: 'badge', 'aria-hidden': 'true' });
    this.#badge.hidden = true;
    this.#button.append(bubbleIcon(), this.#badge);

    this.#panel = element('div', 'gb-panel', {
      id: 'gb-panel',
      part: 'panel',
      role: 'dialog',
      'data-position': position,
    });
    this.#panel.hidden = true;
    const bar = element('div', 'gb-panel-bar', { part: 'panel-bar' });
    this.#title = element('span', 'gb-panel-title');
    this.#close = element('button', 'gb-panel-close', { type: 'button', part: 'close' });
    this.#close.textContent = '×';
    bar.append(this.#title, this.#close);
    const close = this.#close;
    this.#panel.append(bar, container);
    root.append(this.#button, this.#panel);
    this.setWords(options.words ?? this.#words);

    // A failed open (the chat could not load) closes again; the element reported why.
    this.#on(this.#button, 'click', () => (this.#open ? this.close() : this.open().catch(() => {})));
    // Loading starts when the pointer or focus comes near, before the click.
    this.#on(this.#button, 'pointerenter', () => options.onPrefetch?.());
    this.#on(this.#button, 'focus', () => options.onPrefetch?.());
    this.#on(close, 'click', () => this.close());
    this.#on(this.#panel, 'keydown', (e) => {
      // Esc inside "View context" closes that dialog first (a modal dialog keeps focus itself).
      if (root.querySelector('dialog[open]')) return;
      // Esc the chat used already (the composer's, to stop a reply) does not close the panel too.
      if (e.key === 'Escape' && !e.defaultPrevented) {
        e.preventDefault();
        this.close();
      } else if (e.key === 'Tab' && matchMedia(FULL_SCREEN).matches) {
        // Full-screen, the page behind is covered: Tab goes round inside the panel.
        const all = focusables(this.#panel);
        const edge = e.shiftKey ? all[0] : all[all.length - 1];
        if (edge && root.activeElement === edge) {
          e.preventDefault();
          (e.shiftKey ? all[all.length - 1] : all[0]).focus();
        }
      }
    });
    this.#on(host, 'glassbox:reply', () => {
      if (!this.#open) this.#setUnread(this.#unread + 1);
    });
    if (this.#remembered() === 'open') this.open({ focus: false }).catch(() => {});
  }

  /** Whether the panel is open. */
  get isOpen() {
    return this.#open;
  }

  /** Opens the panel; focus goes to the message input unless `focus` is false. */
  async open({ focus = true } = {}) {
    if (this.#open) return;
    this.#open = true;
    this.#remember('open');
    this.#setUnread(0);
    this.#panel.hidden = false;
    this.#panel.setAttribute('aria-modal', String(matchMedia(FULL_SCREEN).matches));
    this.#button.setAttribute('aria-expanded', 'true');
    this.#button.setAttribute('aria-label', this.#words.launcher_close);
    this.#host.dispatchEvent(
      new CustomEvent('glassbox:toggle', { detail: { open: true }, bubbles: true, composed: true }),
    );
    try {
      await this.#options.onOpen?.();
    } catch (error) {
      this.close();
      throw error;
    }
    if (focus && this.#open) this.#focusInput();
  }

  /** Closes the panel (the chat stays connected). Focus that was in the panel goes back to the
   * button; focus elsewhere in the page stays where it is. */
  close() {
    if (!this.#open) return;
    const focusWasInside = this.#panel.contains(this.#root.activeElement);
    this.#open = false;
    this.#remember('closed');
    this.#panel.hidden = true;
    this.#button.setAttribute('aria-expanded', 'false');
    this.#setUnread(this.#unread);
    if (focusWasInside) this.#button.focus();
    this.#host.dispatchEvent(
      new CustomEvent('glassbox:toggle', { detail: { open: false }, bubbles: true, composed: true }),
    );
  }

  /** Shows `words` (from [`launcherWords`]) on the button and the panel. */
  setWords(words) {
    this.#words = words;
    this.#panel.setAttribute('aria-label', words.launcher_title);
    this.#title.textContent = words.launcher_title;
    this.#close.setAttribute('aria-label', words.launcher_close);
    if (this.#open) this.#button.setAttribute('aria-label', words.launcher_close);
    else this.#setUnread(this.#unread);
  }

  /** Moves the button and the panel to `position` (one of the four corners). */
  setPosition(position) {
    this.#button.dataset.position = position;
    this.#panel.dataset.position = position;
  }

  /** Removes the button and the panel (the container is left to the caller). */
  destroy() {
    for (const [target, type, listener] of this.#listeners) target.removeEventListener(type, listener);
    this.#listeners = [];
    this.#button.remove();
    this.#panel.remove();
  }

  #on(target, type, listener) {
    target.addEventListener(type, listener);
    this.#listeners.push([target, type, listener]);
  }

  #setUnread(count) {
    this.#unread = count;
    this.#badge.hidden = count === 0;
    this.#badge.textContent = count > 9 ? '9+' : String(count);
    if (!this.#open) {
      const w = this.#words;
      const label = count === 0 ? w.launcher_open : count === 1 ? w.launcher_unread_one : w.launcher_unread_many;
      this.#button.setAttribute('aria-label', label.replaceAll('{count}', String(count)));
    }
  }

  /** Focuses the message input once the chat has drawn it (a few frames at most). */
  #focusInput(frames = 30) {
    const input = this.#container.querySelector('.gb-input');
    if (input) {
      input.focus();
    } else if (frames > 0) {
      requestAnimationFrame(() => this.#open && this.#focusInput(frames - 1));
    }
  }

  #remembered() {
    try {
      return localStorage.getItem(this.#options.storageKey());
    } catch {
      return null; // Storage can be off (privacy settings, sandboxed frames): nothing is remembered.
    }
  }

  #remember(state) {
    try {
      localStorage.setItem(this.#options.storageKey(), state);
    } catch {
      // As above.
    }
  }
}
