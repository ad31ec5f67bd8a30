// The shadow root both Glassbox elements mount into: an open root with the widget's stylesheet and
// one container element (class `className`) that the wasm view is mounted into.
export function shadowContainer(element, className) {
  const root = element.attachShadow({ mode: 'open' });
  const style = document.createElement('link');
  style.rel = 'stylesheet';
  style.href = new URL('glassbox.css', import.meta.url).href;
  const container = document.createElement('div');
  container.className = className;
  root.append(style, container);
  return container;
}
