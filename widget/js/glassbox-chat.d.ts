// Types of the Glassbox custom elements: <glassbox-chat> and <glassbox-token-meter>.
// The wire's shapes are described in docs/protocol.md; the names here follow it (camelCase).

/** A stable, machine-readable error code (the wire's, the HTTP API's and the element's). */
export type ErrorCode =
  | 'malformed_json' | 'unknown_frame_type' | 'invalid_frame' | 'frame_too_large' | 'invalid_message'
  | 'context_too_large' | 'context_invalid' | 'context_overflow' | 'invalid_settings' | 'invalid_filter'
  | 'invalid_context_set' | 'invalid_attachment' | 'file_too_large' | 'file_type_not_allowed' | 'invalid_client_message_id' | 'hello_required'
  | 'unauthorized' | 'not_found' | 'conflict' | 'model_not_allowed' | 'unknown_agent'
  | 'origin_not_allowed' | 'unsupported_media_type' | 'budget_exhausted' | 'storage_full' | 'provider_error'
  | 'provider_timeout' | 'provider_unavailable' | 'rate_limited' | 'cancelled'
  | 'embeddings_unavailable' | 'overloaded' | 'internal';

/** An error as the server or the element reports it. */
export interface GlassboxErrorDetail {
  code: ErrorCode;
  message: string;
  /** Whether repeating the same action may succeed. */
  retryable: boolean;
  /** The reply this error concerns, if any. */
  messageId?: string;
  /** The `clientMessageId` of the message that was refused, if any. */
  clientMessageId?: string;
  /** For `rate_limited` and `budget_exhausted`: milliseconds until the action may succeed. */
  retryAfterMs?: number;
}

/** What the element's promises reject with: an `Error` named `GlassboxError[code]`. */
export interface GlassboxError extends Error {
  code: ErrorCode;
}

/** Page data sent with a message: reaches the model as delimited data, never shown in the message. */
export type PageContext = Record<string, unknown>;

/** A file sent with a message. */
/**
 * A file attached to a message: one uploaded to the conversation (`id`, from `uploadFile`; the
 * server fills in the rest) or a link (`name` and `url`).
 */
export interface Attachment {
  id?: string;
  name: string;
  mimeType?: string;
  size?: number;
  url?: string;
  /** An uploaded image's size in pixels. */
  width?: number;
  height?: number;
}

/** Token counts as the provider reported them (or, when `counted`, our counts: a stopped reply). */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  counted?: boolean;
  [key: string]: unknown;
}

/** One part of what the model was given, with its tokens and the reason it was given. */
export interface ReceiptPart {
  kind: string;
  reason: { kind: string; [key: string]: unknown };
  tokens: number;
  [key: string]: unknown;
}

/** What a reply's request carried and left out, and our count (the "View context" data). */
export interface Receipt {
  countedInputTokens: number;
  encoding: string;
  exact: boolean;
  contextLimit: number;
  outputReserve: number;
  parts?: ReceiptPart[];
  leftOut?: unknown[];
  [key: string]: unknown;
}

/** A message of the conversation. */
export interface ChatMessage {
  id: string;
  role: 'user' | 'assistant';
  content: string;
  status: 'complete' | 'streaming' | 'failed' | 'stopped';
  /** Milliseconds since the Unix epoch. */
  createdAt: number;
  clientMessageId?: string;
  /** For replies: the user message answered. */
  replyTo?: string;
  /** The page context sent with a user message (for the host; never rendered by the widget). */
  context?: PageContext;
  attachments?: Attachment[];
  usage?: Usage;
  receipt?: Receipt;
  error?: GlassboxErrorDetail;
  mark?: 'pinned' | 'excluded';
  /** A reply's tool rounds, in order. */
  toolRounds?: unknown[];
}

/** The session's context sets (files, applet, endpoints, and the host's own). */
export interface ContextDetail {
  reason: string;
  context: Record<string, unknown>;
  /** The set that changed, when one did. */
  setName?: string;
}

/** Which messages the topic filter lets through. */
export interface FilterChangedDetail {
  messageIds: string[];
  labels: string[];
  orphaned: string[];
  renamed: { from: string; to: string }[];
  total: number;
  status: string;
}

/** The session's topics (the bubble cloud). */
export interface SessionTopics {
  /** Regular topics, largest first. */
  topics: { label: string; count: number; [key: string]: unknown }[];
  [key: string]: unknown;
}

/** The topic filter and the history it lets through. */
export interface FilterView {
  labels: string[];
  [key: string]: unknown;
}

/** A rule, reference or tool (with its MCP server) of the agent, named for `addItem` / `removeItem`. */
export interface ItemRef {
  kind: 'rule' | 'reference' | 'tool';
  name: string;
  server?: string;
}

/** A tool call waiting for the user's yes (`glassbox:approval`; answer with `approve`). */
export interface ApprovalRequest {
  messageId: string;
  approvalId: string;
  server: string;
  tool: string;
  title?: string;
  description: string;
  arguments: unknown;
  /** The tool's annotations: the server's claims, not checked. */
  annotations?: Record<string, unknown>;
  /** What the tool's definition costs in every request that offers it. */
  tokens: number;
  /** When an unanswered call counts as denied (ms since the epoch). */
  expiresAt: number;
}

/** The agent's items and the session's choices (`getItems()`). */
export interface SessionItems {
  agent: string;
  available: unknown[];
  session: unknown[];
  defaults: Record<string, unknown>;
  overrides: Record<string, unknown>;
}

/** The events <glassbox-chat> dispatches (bubbling and composed). */
export interface GlassboxChatEventMap {
  /** The user's message, as the server stored it. */
  'glassbox:message': CustomEvent<ChatMessage>;
  /** A finished reply: `status` 'complete', or 'stopped' when the user stopped it. */
  'glassbox:reply': CustomEvent<ChatMessage>;
  /** A tool call waits for the user's yes (the widget shows its dialog; `approve` answers too). */
  'glassbox:approval': CustomEvent<ApprovalRequest>;
  /** An error the widget shows (a refused message, a failed reply, a lost connection's cause). */
  'glassbox:error': CustomEvent<GlassboxErrorDetail>;
  /** The session's context sets changed. */
  'glassbox:context': CustomEvent<ContextDetail>;
  /** The topic filter changed. */
  'glassbox:filter-changed': CustomEvent<FilterChangedDetail>;
  /** Launcher mode: the panel opened or closed. */
  'glassbox:toggle': CustomEvent<{ open: boolean }>;
}

/** `<glassbox-chat>`: the chat widget. */
export interface GlassboxChatElement extends HTMLElement {
  /** Launcher mode: whether the panel is open (always true in inline mode while connected). */
  readonly isOpen: boolean;
  /**
   * The host's own words over the widget's, by key (docs/strings.md lists them: `send`,
   * `write_a_message`, `launcher_open`, …; `{name}` marks a slot filled when shown). Applied in
   * place; `null` clears them.
   */
  strings: GlassboxStrings | null;
  /** Sends a message; `context` is page data for the model, never shown in the message. */
  sendMessage(text: string, attachments?: Attachment[] | null, context?: PageContext | null): Promise<void>;
  /** Sets the page context sent with every later message; `null` clears it. */
  setPageContext(context: PageContext | null): Promise<void>;
  /**
   * Uploads a file (a PNG, JPEG, GIF or WebP still image up to 3.75 MB, a text file up to 256 kB) to the
   * conversation; resolves to the attachment for `sendMessage`, rejects with `file_too_large`,
   * `file_type_not_allowed`, …
   */
  uploadFile(file: File): Promise<Attachment>;
  /** Changes one of the session's context sets. */
  setContext(setName: string, items: string[], mode?: 'replace' | 'merge'): Promise<void>;
  /** Selects topics by label (empty clears the filter). */
  setFilter(labels: string[]): Promise<void>;
  /** The session's topics and filter as last received (each null before the server sent them). */
  getTopics(): Promise<{ topics: SessionTopics | null; filter: FilterView | null } | null>;
  /** Similarity mode on or off; a threshold (0–1) sets the cosine, `null` returns it to the server's. */
  setSimilarityMode(enabled: boolean, threshold?: number | null): Promise<void>;
  /** Pins, excludes or unmarks a message. */
  markMessage(messageId: string, mark: 'pinned' | 'excluded' | null): Promise<void>;
  /** The agent's items and the session's choices as last received, or null. */
  getItems(): Promise<SessionItems | null>;
  addItem(item: ItemRef): Promise<void>;
  removeItem(item: ItemRef): Promise<void>;
  /** Answers a waiting tool call; `reason` (for a denial) is told to the model. */
  approve(approvalId: string, decision: 'allow' | 'deny' | 'allow_session', reason?: string): Promise<void>;
  /** Replaces the session's overrides of the agent's defaults ({} clears them). */
  setOverrides(overrides: Record<string, unknown>): Promise<void>;
  /**
   * Stops a streaming reply (`messageId`, else the one streaming now): it ends with status
   * `stopped` and its text so far, in every tab. False when none was streaming. (The connection
   * status `stopped` is something else: the element was removed.)
   */
  stopReply(messageId?: string | null): Promise<boolean>;
  /** The receipt a turn answering `text` would have now, without sending it. */
  preview(text: string, attachments?: Attachment[] | null, context?: PageContext | null): Promise<Receipt>;
  /** Deletes this conversation on the server and starts a new one. */
  clearSession(): Promise<void>;
  /** Launcher mode: opens the panel (loading the chat on first use). */
  open(): Promise<void>;
  /** Launcher mode: closes the panel; the conversation stays connected. */
  close(): void;

  addEventListener<K extends keyof GlassboxChatEventMap>(
    type: K,
    listener: (this: GlassboxChatElement, ev: GlassboxChatEventMap[K]) => unknown,
    options?: boolean | AddEventListenerOptions,
  ): void;
  addEventListener(
    type: string,
    listener: EventListenerOrEventListenerObject,
    options?: boolean | AddEventListenerOptions,
  ): void;
  removeEventListener<K extends keyof GlassboxChatEventMap>(
    type: K,
    listener: (this: GlassboxChatElement, ev: GlassboxChatEventMap[K]) => unknown,
    options?: boolean | EventListenerOptions,
  ): void;
  removeEventListener(
    type: string,
    listener: EventListenerOrEventListenerObject,
    options?: boolean | EventListenerOptions,
  ): void;
}

/** A reading of the token meter. */
export interface MeterReading {
  used: number;
  limit: number;
  percent: number;
  state: string;
  estimated: boolean;
  [key: string]: unknown;
}

/** `<glassbox-token-meter>`: the token meter alone, counting in the browser with no server. */
export interface GlassboxTokenMeterElement extends HTMLElement {
  setText(text: string): void;
  setMessages(messages: string[]): void;
  setSystemPrompt(text: string): void;
  reading(): MeterReading | null;
}

/** The host's words for the widget's strings, key → string (docs/strings.md lists the keys). */
export type GlassboxStrings = Record<string, string>;

/** The attributes of <glassbox-chat>, for JSX and templates. */
export interface GlassboxChatAttributes {
  server?: string;
  session?: string;
  agent?: string;
  model?: string;
  theme?: 'light' | 'dark' | 'auto';
  mode?: 'inline' | 'launcher';
  position?: 'bottom-right' | 'bottom-left' | 'top-right' | 'top-left';
  vocab?: string;
  'file-link'?: string;
  'applet-link'?: string;
  capture?: string;
  'hide-context-values'?: boolean | '';
  /** A user the host's backend vouches for (with `user-hash`, the hex HMAC-SHA256 of this id under
   * the server's GLASSBOX_IDENTITY_SECRET): their conversations follow them to any device. */
  'user-id'?: string;
  /** The hash of `user-id`, made by the host's backend (never in the browser's code). */
  'user-hash'?: string;
  /** The composer's placeholder (over the agent's). */
  placeholder?: string;
  /** Shown before the first message, never sent to the model (over the agent's). */
  welcome?: string;
  /** Up to four prompts shown as chips on an empty chat, as a JSON array of strings (over the agent's). */
  starters?: string;
  /** The language of the widget's strings (`fr…`: French, else English); unset: the page's. */
  lang?: string;
  /** The folder of the token worker and vocabularies (default: beside the script on a Glassbox
   * server, else the server's `/widget/`). */
  assets?: string;
}

declare global {
  interface HTMLElementTagNameMap {
    'glassbox-chat': GlassboxChatElement;
    'glassbox-token-meter': GlassboxTokenMeterElement;
  }
}
