// The shadow root both Glassbox elements draw into: an open root holding the widget's stylesheet.
export function shadowRoot(element) {
  const root = element.attachShadow({ mode: 'open' });
  const style = document.createElement('link');
  style.rel = 'stylesheet';
  style.href = new URL('./glassbox.css', import.meta.url).href;
  root.append(style);
  return root;
}

// Adds the panels' stylesheet (View context, topics, the draft's preview, the session drawer, the
// approval dialog) to
// `root`, once: the chat does so when it has mounted, so its first paint waits for less.
export function addPanelStyles(root) {
  if (root.querySelector('link[data-gb-panels]')) return;
  const style = document.createElement('link');
  style.rel = 'stylesheet';
  style.dataset.gbPanels = '';
  style.href = new URL('./glassbox-panels.css', import.meta.url).href;
  root.append(style);
}

// The shadow root with one container element (class `className`) that the wasm view mounts into.
export function shadowContainer(element, className) {
  const container = document.createElement('div');
  container.className = className;
  shadowRoot(element).append(container);
  return container;
}
