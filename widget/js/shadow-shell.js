// The shadow root both Glassbox elements draw into: an open root holding the widget's stylesheet.
export function shadowRoot(element) {
  const root = element.attachShadow({ mode: 'open' });
  const style = document.createElement('link');
  style.rel = 'stylesheet';
  style.href = new URL('./glassbox.css', import.meta.url).href;
  root.append(style);
  return root;
}

// The shadow root with one container element (class `className`) that the wasm view mounts into.
export function shadowContainer(element, className) {
  const container = document.createElement('div');
  container.className = className;
  shadowRoot(element).append(container);
  return container;
}
