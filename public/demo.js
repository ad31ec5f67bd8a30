// The demo host page's script (a file, so the page's Content-Security-Policy needs no inline script).
const chat = document.getElementById('chat');
const view = document.getElementById('context-view');
function show(page, entity) {
  const context = { page, description: `Viewing ${page}`, pathname: `/${page}` };
  if (entity) { context.entity = entity; context.entityType = 'pack'; }
  view.textContent = JSON.stringify(context, null, 2);
  chat.setPageContext(context);
  for (const b of document.querySelectorAll('#pages button')) {
    b.setAttribute('aria-pressed', String(b.dataset.page === page));
  }
}
for (const b of document.querySelectorAll('#pages button')) {
  b.addEventListener('click', () => show(b.dataset.page, b.dataset.entity));
}
for (const b of document.querySelectorAll('button[data-theme]')) {
  b.addEventListener('click', () => chat.setAttribute('theme', b.dataset.theme));
}
show('home');
