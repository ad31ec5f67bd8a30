// Types of glassbox-wasm.js: the widget's WebAssembly, loaded once, and its chat with no view.
import type {
  ApprovalRequest, Attachment, ChatMessage, ContextDetail, FilterView, GlassboxErrorDetail, PageContext,
  SessionTopics,
} from './glassbox-chat.js';

/** A message the user sent that the server has not stored yet. */
export interface PendingMessage {
  clientMessageId: string;
  content: string;
  /** The server's refusal, if it refused it. */
  error?: GlassboxErrorDetail;
}

/** What `GlassboxClient.snapshot()` returns. */
export interface ClientSnapshot {
  status: 'connecting' | 'connected' | 'reconnecting' | 'stopped';
  reconnectInSecs?: number;
  sessionId: string | null;
  /** Every stored message's id, in order. */
  order: string[];
  /** The stored messages new or changed since the previous snapshot. */
  changed: ChatMessage[];
  pending: PendingMessage[];
  /** The newest error that concerns no message. */
  notice: GlassboxErrorDetail | null;
  contextSets: ContextDetail['context'] | null;
  topics: SessionTopics | null;
  filter: FilterView | null;
  contextInfo: { model: string; contextLimit: number; [key: string]: unknown } | null;
  /** Tool calls waiting for the user's yes, oldest first. */
  approvals: ApprovalRequest[];
  /** What to show before the first message: the host's words, else the session's agent's. */
  greeting: { placeholder: string | null; welcome: string | null; starters: string[] };
}

/** A chat connection with no view (the element's client). */
export class GlassboxClient {
  /** Connects; `onChange` runs after each batch of changes (streamed text once per frame). */
  constructor(
    options: {
      server: string;
      session?: string;
      agent?: string;
      model?: string;
      /** A user the host's backend vouches for, and its hash (hex HMAC-SHA256 of the id). */
      userId?: string | null;
      userHash?: string | null;
      /** The host's own words, over the agent's (`snapshot().greeting` has the result). */
      placeholder?: string | null;
      welcome?: string | null;
      starters?: string[];
    },
    onChange: () => void,
  );
  snapshot(): ClientSnapshot | null;
  /** Makes the next snapshot carry every message. */
  resendAll(): void;
  /** Where `glassbox:message`, `glassbox:reply`, `glassbox:error`, … are dispatched. */
  readonly events: EventTarget;
  sendMessage(text: string, attachments?: Attachment[] | null, context?: PageContext | null): void;
  setPageContext(context: PageContext | null): void;
  /** Resolves to the attachment for `sendMessage`. */
  uploadFile(file: File): Promise<Attachment>;
  retry(messageId: string): void;
  /** Stops `messageId`, else the reply streaming now; false when none was. */
  stopReply(messageId?: string | null): boolean;
  setContext(setName: string, items: string[], mode?: 'replace' | 'merge' | null): void;
  setFilter(labels: string[]): void;
  clearSession(): void;
  /** Answers a tool call waiting for the user's yes; throws `invalid_approval` for another word. */
  approve(approvalId: string, decision: 'allow' | 'deny' | 'allow_session', reason?: string | null): void;
  close(): void;
  free(): void;
}

/** The module's exports once the wasm is loaded. */
export interface GlassboxModule {
  GlassboxClient: typeof GlassboxClient;
  [name: string]: unknown;
}

/** Loads the wasm once (from beside this file, or `wasm`: a URL, a Response or the bytes). */
export function loadGlassbox(wasm?: URL | string | Response | BufferSource): Promise<GlassboxModule>;

/**
 * Starts the token worker (and the vocabulary at `vocabUrl`, if given) while the wasm compiles;
 * the chat or meter that mounts next takes it over. The elements call it themselves.
 */
export function startTokenWorker(workerUrl: string, vocabUrl?: string | null): void;

/** The token worker's URL and the vocabulary URL of `encoding` for `assets` and `vocab`. */
export function tokenAssets(
  assets: string,
  vocab: string | null,
  encoding: string | null,
): { worker: string; vocab: string | null };
