// The React demo: an app with routes whose page context goes with every message, as a host app
// passes "what the user is viewing". The chat on the right is drawn by the app with
// useGlassboxChat; the launcher at the bottom right is <GlassboxChat mode="launcher">.
import { StrictMode, useEffect, useState } from 'react';
import type { FormEvent, MouseEvent } from 'react';
import { createRoot } from 'react-dom/client';
import { GlassboxChat, useGlassboxChat } from '../src/index.js';
import type { PageContext } from '../src/index.js';

const server = location.origin;

/** The app's routes and the page context each gives. */
const ROUTES: Record<string, PageContext> = {
  '/react/': { page: 'home', description: 'Viewing the home page' },
  '/react/packs/illustrious-xl': {
    page: 'pack-detail',
    description: 'Viewing pack detail',
    entity: 'Illustrious-XL',
    entityType: 'pack',
  },
  '/react/settings': { page: 'settings', description: 'Viewing settings' },
};

function usePathname(): [string, (to: string) => void] {
  const [pathname, setPathname] = useState(location.pathname);
  useEffect(() => {
    const onPop = () => setPathname(location.pathname);
    addEventListener('popstate', onPop);
    return () => removeEventListener('popstate', onPop);
  }, []);
  const navigate = (to: string) => {
    history.pushState({}, '', to);
    setPathname(to);
  };
  return [pathname, navigate];
}

function Chat({ context }: { context: PageContext }) {
  const chat = useGlassboxChat({ server, session: 'react-demo' });
  const [draft, setDraft] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const send = (e: FormEvent) => {
    e.preventDefault();
    chat
      .sendMessage(draft, [], context)
      .then(() => {
        setDraft('');
        setProblem(null);
      })
      .catch((err: Error) => setProblem(err.message));
  };
  return (
    <section className="card chat" aria-label="Chat">
      <p className="muted" data-testid="status">
        {chat.status}
        {chat.usage ? ` · last reply: ${chat.usage.inputTokens} tokens in, ${chat.usage.outputTokens} out` : ''}
      </p>
      <ol>
        {chat.messages.map((m) => (
          <li key={m.id} data-role={m.role} data-status={m.status}>
            {m.content}
            {m.error ? <span className="error"> — {m.error.message}</span> : null}
          </li>
        ))}
      </ol>
      {chat.error ? <p className="error">{chat.error.message}</p> : null}
      <form onSubmit={send}>
        <textarea
          aria-label="Message"
          rows={2}
          value={draft}
          onChange={(e) => setDraft(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter' && !e.shiftKey) send(e);
          }}
        />
        <button type="submit" disabled={!draft.trim()}>
          Send
        </button>
      </form>
      {problem ? <p className="error" role="alert">{problem}</p> : null}
    </section>
  );
}

function App() {
  const [pathname, navigate] = usePathname();
  const context = { ...(ROUTES[pathname] ?? ROUTES['/react/']), pathname };
  const link = (to: string, label: string) => (
    <a
      href={to}
      aria-current={pathname === to ? 'page' : undefined}
      onClick={(e: MouseEvent) => {
        e.preventDefault();
        navigate(to);
      }}
    >
      {label}
    </a>
  );
  return (
    <div className="layout">
      <main className="card">
        <h1>Glassbox in a React app</h1>
        <nav aria-label="Demo routes">
          {link('/react/', 'Home')}
          {link('/react/packs/illustrious-xl', 'Pack: Illustrious-XL')}
          {link('/react/settings', 'Settings')}
        </nav>
        <p>
          Each route gives the chat its page context. It goes to the model with every message, as data, and never into
          the message you see.
        </p>
        <pre data-testid="context">{JSON.stringify(context, null, 2)}</pre>
        <p className="muted">
          The button at the bottom right is the same chat as a launcher (<code>&lt;GlassboxChat mode="launcher"&gt;</code>),
          in a conversation of its own.
        </p>
      </main>
      <Chat context={context} />
      <GlassboxChat mode="launcher" session="react-launcher" server={server} pageContext={context} />
    </div>
  );
}

const root = document.getElementById('app');
if (root) {
  createRoot(root).render(
    <StrictMode>
      <App />
    </StrictMode>,
  );
}
