import { createElement, useEffect, useLayoutEffect, useRef } from 'react';
import type { CSSProperties } from 'react';
// The chat element alone: the meter's element and wasm stay out of the app's bundle.
import 'glassbox-chat/chat';
import type {
  ApprovalRequest,
  ChatMessage,
  GlassboxChatAttributes,
  GlassboxChatElement,
  GlassboxErrorDetail,
  GlassboxStrings,
  PageContext,
} from 'glassbox-chat';

/** Props of `<GlassboxChat>`: the element's attributes, page context and event callbacks. */
export interface GlassboxChatProps
  extends Omit<GlassboxChatAttributes, 'hide-context-values' | 'user-id' | 'user-hash' | 'starters'> {
  /** Up to four prompts shown as chips on an empty chat (over the agent's). */
  starters?: string[];
  /** A user your backend vouches for (`hash`: hex HMAC-SHA256 of `id`, made on your server). */
  user?: { id: string; hash: string } | null;
  /** Your words over the widget's, by key (docs/strings.md); applied in place. `lang` picks the
   * widget's language (French for `fr…`), else the page's. */
  strings?: GlassboxStrings | null;
  /** Sent with every later message as data for the model; never shown in the message. */
  pageContext?: PageContext | null;
  /** "View context" shows page-context keys only, never their values. */
  hideContextValues?: boolean;
  /** The user's message, as the server stored it. */
  onMessage?: (message: ChatMessage) => void;
  /** A finished reply. */
  onReply?: (message: ChatMessage) => void;
  /** An error the widget shows, or a page context the element refused. */
  onError?: (error: GlassboxErrorDetail) => void;
  /** Launcher mode: the panel opened or closed. */
  onToggle?: (open: boolean) => void;
  /** A tool call waits for the user's yes (the widget shows its dialog too). */
  onApproval?: (request: ApprovalRequest) => void;
  className?: string;
  style?: CSSProperties;
}

/**
 * The `<glassbox-chat>` element as a React component: the widget with its own view (inline, or
 * a launcher with `mode="launcher"`). `pageContext` follows the prop, compared by value.
 */
export function GlassboxChat(props: GlassboxChatProps) {
  const {
    pageContext,
    hideContextValues,
    user,
    starters,
    strings,
    onMessage,
    onReply,
    onError,
    onToggle,
    onApproval,
    className,
    style,
    ...attributes
  } = props;
  const ref = useRef<GlassboxChatElement | null>(null);
  const handlers = useRef({ onMessage, onReply, onError, onToggle, onApproval });
  handlers.current = { onMessage, onReply, onError, onToggle, onApproval };

  const contextJson = JSON.stringify(pageContext ?? null);
  useEffect(() => {
    const element = ref.current;
    if (!element) return;
    element.setPageContext(JSON.parse(contextJson) as PageContext | null).catch((e: { code?: string; message?: string }) =>
      handlers.current.onError?.({
        code: (e.code ?? 'invalid_frame') as GlassboxErrorDetail['code'],
        message: e.message ?? String(e),
        retryable: false,
      }),
    );
  }, [contextJson]);

  const stringsJson = JSON.stringify(strings ?? null);
  // Before the browser paints: a chat that mounts at once shows the host's words from the start.
  useLayoutEffect(() => {
    if (ref.current) ref.current.strings = JSON.parse(stringsJson) as GlassboxStrings | null;
  }, [stringsJson]);

  useEffect(() => {
    const element = ref.current;
    if (!element) return;
    const listeners: Array<[string, (e: Event) => void]> = [
      ['glassbox:message', (e) => handlers.current.onMessage?.((e as CustomEvent<ChatMessage>).detail)],
      ['glassbox:reply', (e) => handlers.current.onReply?.((e as CustomEvent<ChatMessage>).detail)],
      ['glassbox:error', (e) => handlers.current.onError?.((e as CustomEvent<GlassboxErrorDetail>).detail)],
      ['glassbox:toggle', (e) => handlers.current.onToggle?.((e as CustomEvent<{ open: boolean }>).detail.open)],
      ['glassbox:approval', (e) => handlers.current.onApproval?.((e as CustomEvent<ApprovalRequest>).detail)],
    ];
    for (const [type, listener] of listeners) element.addEventListener(type, listener);
    return () => {
      for (const [type, listener] of listeners) element.removeEventListener(type, listener);
    };
  }, []);

  return createElement('glassbox-chat', {
    ref,
    ...attributes,
    ...(hideContextValues ? { 'hide-context-values': '' } : {}),
    ...(user ? { 'user-id': user.id, 'user-hash': user.hash } : {}),
    ...(starters?.length ? { starters: JSON.stringify(starters) } : {}),
    className,
    style,
  });
}
