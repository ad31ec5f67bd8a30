// One chat connection per server and session slot, shared by every component that asks for it.
// It opens when the first subscriber comes and closes a task after the last one leaves, so
// React's StrictMode (mount, unmount, mount again in one go) keeps a single socket; a store that
// closed opens again for its next subscriber. Calls made before the wasm has loaded wait for it, in
// order: nothing sent early is lost.

import type { ClientSnapshot, GlassboxClient } from 'glassbox-chat/wasm';
import type {
  ApprovalRequest,
  Attachment,
  ChatMessage,
  GlassboxErrorDetail,
  PageContext,
  Receipt,
  Usage,
} from 'glassbox-chat';

/** Which chat: the server, and the conversation slot kept in the browser. */
export interface ChatOptions {
  /** The Glassbox server, e.g. `https://glassbox.example.com`. */
  server: string;
  /** Names the conversation slot kept in localStorage (`default`). */
  session?: string;
  /** One of the agents the server configures (its first when absent). */
  agent?: string;
  /** A model the server allows. */
  model?: string;
  /**
   * A user your backend vouches for: `hash` is the hex HMAC-SHA256 of `id` under the server's
   * `GLASSBOX_IDENTITY_SECRET`, made on your server (docs/embedding.md). Their conversations are
   * theirs on any device; the conversation slot is kept per user.
   */
  user?: { id: string; hash: string } | null;
  /** The composer's placeholder, over the agent's (read back as `greeting.placeholder`). */
  placeholder?: string;
  /** Shown before the first message, never sent to the model, over the agent's. */
  welcome?: string;
  /** Up to four prompts to offer on an empty chat, over the agent's. */
  starters?: string[];
  /**
   * Keep the page context a message was sent with on the local message (`message.context`), for
   * display hints. Off by default: the context goes to the model, not into `messages`.
   */
  keepContext?: boolean;
}

/** A message as the hook gives it: stored, or sent and not stored yet (`status: 'sending'`). */
export type Message = Omit<ChatMessage, 'status'> & {
  status: ChatMessage['status'] | 'sending';
};

/** The connection: `loading` until the wasm has loaded; `failed` when it could not load or the
 * options were refused (`error` says why; the next subscriber tries again). */
export type ChatStatus = 'loading' | 'failed' | ClientSnapshot['status'];

/** Everything the hook reads. */
export interface ChatState {
  status: ChatStatus;
  /** While reconnecting: seconds until the next attempt. */
  reconnectInSecs: number | null;
  sessionId: string | null;
  messages: Message[];
  /** The provider's counts for the last finished reply (null when the provider gave none). */
  usage: Usage | null;
  /** What the last finished reply's request carried and left out ("View context"). */
  receipt: Receipt | null;
  topics: ClientSnapshot['topics'];
  contextSets: ClientSnapshot['contextSets'];
  filter: ClientSnapshot['filter'];
  contextInfo: ClientSnapshot['contextInfo'];
  /** Tool calls waiting for the user's yes, oldest first (answer with `approve`). */
  approvals: ApprovalRequest[];
  /** What to show before the first message: your options' words, else the session's agent's. */
  greeting: ClientSnapshot['greeting'];
  /** The newest error that concerns no message. */
  error: GlassboxErrorDetail | null;
}

const INITIAL: ChatState = {
  status: 'loading',
  reconnectInSecs: null,
  sessionId: null,
  messages: [],
  usage: null,
  receipt: null,
  topics: null,
  contextSets: null,
  filter: null,
  contextInfo: null,
  approvals: [],
  greeting: { placeholder: null, welcome: null, starters: [] },
  error: null,
};

let wasmSource: URL | string | Response | BufferSource | undefined;

/**
 * Where the widget's wasm comes from, when not from beside `glassbox-chat`'s files (tests under
 * Node, a CDN). Call before the first chat mounts.
 */
export function configureGlassbox(options: { wasm?: URL | string | Response | BufferSource }): void {
  wasmSource = options.wasm;
}

/** A chat connection and the state it shows. */
export class ChatStore {
  readonly #options: ChatOptions;
  readonly #key: string;
  #client: GlassboxClient | null = null;
  #loading: Promise<GlassboxClient> | null = null;
  #listeners = new Set<() => void>();
  #closing: ReturnType<typeof setTimeout> | null = null;
  #state: ChatState = INITIAL;
  #stored = new Map<string, ChatMessage>();
  /** When each message not yet stored was first seen (its `createdAt` until the server's). */
  #sentAt = new Map<string, number>();

  constructor(options: ChatOptions, key: string) {
    this.#options = options;
    this.#key = key;
  }

  /** For `useSyncExternalStore`: opens on the first subscriber, closes after the last. */
  subscribe = (listener: () => void): (() => void) => {
    this.#listeners.add(listener);
    if (this.#closing) {
      clearTimeout(this.#closing);
      this.#closing = null;
    }
    if (!stores.has(this.#key)) stores.set(this.#key, this);
    this.#open().catch(() => {});
    return () => {
      this.#listeners.delete(listener);
      if (this.#listeners.size === 0 && !this.#closing) {
        this.#closing = setTimeout(() => this.#close(), 0);
      }
    };
  };

  /** For `useSyncExternalStore`: the same object until something changes. */
  getSnapshot = (): ChatState => this.#state;

  /** Runs `action` on the client, once it is there; rejects with the client's typed error. */
  async call<T>(action: (client: GlassboxClient) => T): Promise<T> {
    return action(await this.#open());
  }

  sendMessage = (text: string, attachments?: Attachment[] | null, context?: PageContext | null) =>
    this.call((c) => c.sendMessage(String(text), attachments ?? null, context ?? null));

  setPageContext = (context: PageContext | null) => this.call((c) => c.setPageContext(context ?? null));

  uploadFile = async (file: File): Promise<Attachment> => (await this.#open()).uploadFile(file);

  retry = (messageId: string) => this.call((c) => c.retry(messageId));

  stopReply = (messageId?: string | null) => this.call((c) => c.stopReply(messageId ?? null));

  setContext = (setName: string, items: string[], mode?: 'replace' | 'merge') =>
    this.call((c) => c.setContext(setName, items, mode ?? null));

  setFilter = (labels: string[]) => this.call((c) => c.setFilter(labels));

  clearSession = () => this.call((c) => c.clearSession());

  approve = (approvalId: string, decision: 'allow' | 'deny' | 'allow_session', reason?: string | null) =>
    this.call((c) => c.approve(approvalId, decision, reason ?? null));

  /** The client, made once the wasm has loaded. A failure is shown as `status: 'failed'` and
   * forgotten, so the next call tries again. */
  #open(): Promise<GlassboxClient> {
    // Imported here, as <glassbox-chat> imports it: a bundler makes one lazily loaded chunk of the
    // wasm's glue, fetched when the first chat opens, instead of warning that the element's lazy
    // import is made eager by this one.
    this.#loading ??= import('glassbox-chat/wasm')
      .then(({ loadGlassbox }) => loadGlassbox(wasmSource))
      .then(({ GlassboxClient }) => {
        const { server, session, agent, model, user, placeholder, welcome, starters } = this.#options;
        const client = new GlassboxClient(
          {
            server,
            session,
            agent,
            model,
            userId: user?.id ?? null,
            userHash: user?.hash ?? null,
            placeholder: placeholder ?? null,
            welcome: welcome ?? null,
            starters: starters ?? [],
          },
          () => this.#update(client),
        );
        this.#client = client;
        return client;
      })
      .catch((e: { code?: string; message?: string }) => {
        this.#loading = null;
        this.#set({
          ...this.#state,
          status: 'failed',
          error: {
            code: (e?.code ?? 'internal') as GlassboxErrorDetail['code'],
            message: `the chat could not start: ${e?.message ?? String(e)}`,
            retryable: true,
          },
        });
        throw e;
      });
    return this.#loading;
  }

  /** Closes the connection once nobody listens; the store can open again. */
  #close(): void {
    this.#closing = null;
    if (this.#listeners.size > 0) return;
    stores.delete(this.#key);
    const client = this.#client;
    this.#client = null;
    this.#loading = null;
    this.#stored.clear();
    this.#sentAt.clear();
    this.#state = INITIAL;
    if (client) {
      client.close();
      client.free();
    }
  }

  #set(state: ChatState): void {
    this.#state = state;
    for (const listener of this.#listeners) listener();
  }

  /** Reads the client's snapshot into a new state object and tells the listeners. */
  #update(client: GlassboxClient): void {
    if (client !== this.#client) return; // a client that was closed
    const snapshot = client.snapshot();
    if (!snapshot) return;
    for (const message of snapshot.changed) {
      if (!this.#options.keepContext) delete message.context;
      this.#stored.set(message.id, message);
    }
    const messages: Message[] = [];
    const order = new Set(snapshot.order);
    for (const id of snapshot.order) {
      const message = this.#stored.get(id);
      if (message) messages.push(message);
    }
    for (const id of [...this.#stored.keys()]) if (!order.has(id)) this.#stored.delete(id);
    const sentAt = new Map<string, number>();
    for (const pending of snapshot.pending) {
      const id = pending.clientMessageId;
      sentAt.set(id, this.#sentAt.get(id) ?? Date.now());
      messages.push({
        id,
        clientMessageId: id,
        role: 'user',
        content: pending.content,
        status: pending.error ? 'failed' : 'sending',
        createdAt: sentAt.get(id)!,
        ...(pending.error ? { error: pending.error } : {}),
      });
    }
    this.#sentAt = sentAt;
    const lastReply = [...messages].reverse().find((m) => m.role === 'assistant' && m.status === 'complete');
    this.#set({
      status: snapshot.status,
      reconnectInSecs: snapshot.reconnectInSecs ?? null,
      sessionId: snapshot.sessionId,
      messages,
      usage: lastReply?.usage ?? null,
      receipt: lastReply?.receipt ?? null,
      topics: snapshot.topics,
      contextSets: snapshot.contextSets,
      filter: snapshot.filter,
      contextInfo: snapshot.contextInfo,
      approvals: snapshot.approvals ?? [],
      greeting: snapshot.greeting ?? INITIAL.greeting,
      error: snapshot.notice,
    });
  }
}

const stores = new Map<string, ChatStore>();

/** The store of this server and slot, made on first use. */
export function chatStore(options: ChatOptions): ChatStore {
  const key = JSON.stringify([
    options.server,
    options.session ?? 'default',
    options.agent ?? null,
    options.model ?? null,
    options.user?.id ?? null,
    options.user?.hash ?? null,
    options.placeholder ?? null,
    options.welcome ?? null,
    options.starters ?? [],
    Boolean(options.keepContext),
  ]);
  let store = stores.get(key);
  if (!store) {
    store = new ChatStore(options, key);
    stores.set(key, store);
  }
  return store;
}
