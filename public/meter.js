// The standalone meter page's script (a file, so the page's Content-Security-Policy needs no inline script).
// Served by Glassbox, the widget lives under /widget/; from a static server in the repository, in dist/.
const base = location.pathname.includes('/public/')
  ? new URL('../dist/', location.href)
  : new URL('/widget/', location.href);
await import(new URL('glassbox-token-meter.js', base).href);
const meter = document.getElementById('meter');
const out = document.getElementById('reading');
meter.addEventListener('glassbox:meter', (e) => {
  const r = e.detail;
  out.textContent = `${r.estimated ? '~' : ''}${r.used.toLocaleString()} tokens (${r.encoding}) of ${r.limit.toLocaleString()} — ${r.percent}% — ${r.state}`;
});
document.getElementById('model').addEventListener('change', (e) => meter.setAttribute('model', e.target.value));
document.getElementById('limit').addEventListener('input', (e) => {
  if (e.target.value) meter.setAttribute('limit', e.target.value); else meter.removeAttribute('limit');
});
