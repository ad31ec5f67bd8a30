import { useMemo, useSyncExternalStore } from 'react';
import type { Attachment, PageContext } from 'glassbox-chat';

import { chatStore } from './store.js';
import type { ChatOptions, ChatState } from './store.js';

/** What `useGlassboxChat` returns: the chat's state and what can be done with it. */
export interface GlassboxChat extends ChatState {
  /**
   * Sends a message. `context` is page data for this message: the model gets it as delimited
   * data; it is not put into `messages` (unless `keepContext`). Rejects with an error whose `code`
   * is one of the wire's codes when the message is refused before sending.
   */
  sendMessage(text: string, attachments?: Attachment[] | null, context?: PageContext | null): Promise<void>;
  /** Page context sent with every later message; `null` clears it. */
  setPageContext(context: PageContext | null): Promise<void>;
  /**
   * Uploads a file to the conversation; resolves to the attachment to pass to `sendMessage`.
   * Rejects with `file_too_large`, `file_type_not_allowed`, … (the wire's codes).
   */
  uploadFile(file: File): Promise<Attachment>;
  /** Asks again for a failed or stopped reply. */
  retry(messageId: string): Promise<void>;
  /**
   * Stops a streaming reply (`messageId`, else the one streaming now): it ends with status
   * `stopped` and the text so far. Resolves to false when none was streaming.
   */
  stopReply(messageId?: string | null): Promise<boolean>;
  /** Changes one of the session's context sets. */
  setContext(setName: string, items: string[], mode?: 'replace' | 'merge'): Promise<void>;
  /** Selects topics by label; `[]` clears the filter. */
  setFilter(labels: string[]): Promise<void>;
  /** Deletes this conversation on the server and starts a new one. */
  clearSession(): Promise<void>;
  /**
   * Answers a tool call waiting for the user's yes (one of `approvals`): `deny`'s `reason` is told
   * to the model. The first answer from any tab wins; a later one changes nothing.
   */
  approve(approvalId: string, decision: 'allow' | 'deny' | 'allow_session', reason?: string | null): Promise<void>;
}

/**
 * A Glassbox chat in a React component: the messages (streamed replies update at most once per
 * animation frame), the connection's status, the last reply's usage and receipt, topics and
 * context sets, and the actions. Components asking for the same server and session share one
 * connection; it closes when the last of them unmounts.
 */
export function useGlassboxChat(options: ChatOptions): GlassboxChat {
  const { server, session, agent, model, keepContext, placeholder, welcome } = options;
  const [userId, userHash] = [options.user?.id, options.user?.hash];
  const startersKey = JSON.stringify(options.starters ?? []);
  const store = useMemo(
    () => {
      const user = userId ? { id: userId, hash: userHash ?? '' } : null;
      const starters = JSON.parse(startersKey) as string[];
      return chatStore({ server, session, agent, model, user, keepContext, placeholder, welcome, starters });
    },
    [server, session, agent, model, userId, userHash, keepContext, placeholder, welcome, startersKey],
  );
  const state = useSyncExternalStore(store.subscribe, store.getSnapshot, store.getSnapshot);
  return useMemo(
    () => ({
      ...state,
      sendMessage: store.sendMessage,
      setPageContext: store.setPageContext,
      uploadFile: store.uploadFile,
      retry: store.retry,
      setContext: store.setContext,
      setFilter: store.setFilter,
      clearSession: store.clearSession,
      approve: store.approve,
      stopReply: store.stopReply,
    }),
    [state, store],
  );
}
