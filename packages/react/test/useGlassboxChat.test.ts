// useGlassboxChat against the real Glassbox server (offline provider) on loopback, in jsdom:
// StrictMode keeps one socket, page context reaches the model and not the message, calls made
// before the wasm loaded are kept, the last unmount closes the connection, and a tool call waiting
// for the user's yes is listed and answered, and a user the host vouches for owns their sessions.
import { createHmac, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { StrictMode, createElement, useEffect } from 'react';
import { act, cleanup, render, waitFor } from '@testing-library/react';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';

import { configureGlassbox, useGlassboxChat } from '../src/index.js';
import type { GlassboxChatState } from '../src/index.js';

const server = process.env.GLASSBOX_TEST_SERVER ?? '';
const identitySecret = process.env.GLASSBOX_TEST_IDENTITY_SECRET ?? '';
const sockets = { opened: 0, closed: 0 };

beforeAll(() => {
  if (!server) throw new Error('GLASSBOX_TEST_SERVER is not set: run these through `cargo xtask test react`');
  // Node's fetch reads no files: the wasm is given as bytes. (Vitest runs in packages/react.)
  configureGlassbox({ wasm: readFileSync(resolve('../../dist/npm/glassbox-chat/glassbox_widget_bg.wasm')) });
  const Native = globalThis.WebSocket;
  globalThis.WebSocket = class extends Native {
    constructor(url: string | URL, protocols?: string | string[]) {
      super(url, protocols);
      sockets.opened++;
      this.addEventListener('close', () => sockets.closed++);
    }
  } as typeof WebSocket;
});

afterEach(() => cleanup());

/** Renders a component that uses the hook; `seen.current` is its latest return value. */
function renderChat(options: Parameters<typeof useGlassboxChat>[0], strict = true, onMount?: (chat: GlassboxChatState) => void) {
  const seen: { current: GlassboxChatState | null } = { current: null };
  function Chat() {
    const chat = useGlassboxChat(options);
    seen.current = chat;
    useEffect(() => onMount?.(chat), []);
    return createElement(
      'ol',
      null,
      chat.messages.map((m) => createElement('li', { key: m.id, 'data-role': m.role, 'data-status': m.status }, m.content)),
    );
  }
  const tree = createElement(Chat);
  const view = render(strict ? createElement(StrictMode, null, tree) : tree);
  return { seen, view };
}

const replies = (chat: GlassboxChatState | null) =>
  (chat?.messages ?? []).filter((m) => m.role === 'assistant' && m.status === 'complete');

describe('useGlassboxChat', () => {
  it('keeps one socket under StrictMode and sends page context to the model, not into the message', async () => {
    const before = { ...sockets };
    const { seen, view } = renderChat({ server, session: 'strict' });
    await waitFor(() => expect(seen.current?.status).toBe('connected'), { timeout: 20_000 });
    expect(sockets.opened - before.opened).toBe(1);

    await act(() =>
      seen.current!.sendMessage('What does this model do?', [], {
        page: 'pack-detail',
        entity: 'Illustrious-XL',
        pathname: '/packs/illustrious-xl',
      }),
    );
    await waitFor(() => expect(replies(seen.current)).toHaveLength(1), { timeout: 20_000 });
    const [question, reply] = seen.current!.messages;
    expect(question.role).toBe('user');
    expect(question.content).toBe('What does this model do?');
    expect(question.context).toBeUndefined();
    expect(reply.content).toContain('Page context came with it, with keys `entity`, `page`, `pathname`.');
    expect(reply.content).not.toContain('Illustrious-XL');
    // The offline provider reports no usage; the receipt is our own count.
    expect(seen.current!.usage).toBeNull();
    expect(seen.current!.receipt?.countedInputTokens).toBeGreaterThan(0);
    // The rendered list is the same.
    expect(view.container.querySelectorAll('li[data-role=user]')[0].textContent).toBe('What does this model do?');
    expect(sockets.opened - before.opened).toBe(1);

    view.unmount();
    await waitFor(() => expect(sockets.closed - before.closed).toBe(1));
  });

  it('keeps a message sent before the client loaded, and the context for display when asked', async () => {
    const { seen } = renderChat({ server, session: 'early', keepContext: true }, false, (chat) => {
      void chat.sendMessage('Sent at once', null, { page: 'settings' });
    });
    await waitFor(() => expect(replies(seen.current)).toHaveLength(1), { timeout: 20_000 });
    const users = seen.current!.messages.filter((m) => m.role === 'user');
    expect(users.map((m) => m.content)).toEqual(['Sent at once']);
    expect(users[0].context).toEqual({ page: 'settings' });
  });

  it('shares one connection between components of the same session and rejects bad input with a code', async () => {
    const before = { ...sockets };
    const first = renderChat({ server, session: 'shared' });
    const second = renderChat({ server, session: 'shared' });
    await waitFor(() => expect(second.seen.current?.status).toBe('connected'), { timeout: 20_000 });
    expect(sockets.opened - before.opened).toBe(1);
    await expect(first.seen.current!.sendMessage('')).rejects.toMatchObject({ code: 'invalid_message' });
    await act(() => first.seen.current!.sendMessage('Seen by both'));
    await waitFor(() => expect(replies(second.seen.current)).toHaveLength(1), { timeout: 20_000 });
    expect(second.seen.current!.messages[0].content).toBe('Seen by both');
  });

  it('opens a session owned by the user the host vouches for, listed for that user only', async () => {
    // The hash as a Node backend makes it (docs/embedding.md).
    const id = `user-${randomUUID()}`;
    const hash = createHmac('sha256', identitySecret).update(id).digest('hex');
    const { seen } = renderChat({ server, session: 'user', user: { id, hash } });
    await waitFor(() => expect(seen.current?.status).toBe('connected'), { timeout: 20_000 });
    await act(() => seen.current!.sendMessage('Remember me'));
    await waitFor(() => expect(replies(seen.current)).toHaveLength(1), { timeout: 20_000 });
    const list = (h: string) =>
      fetch(`${server}/api/sessions`, { headers: { 'X-Glassbox-User': id, 'X-Glassbox-User-Hash': h } });
    const listed = await (await list(hash)).json();
    expect(listed.sessions.map((s: { sessionId: string }) => s.sessionId)).toEqual([seen.current!.sessionId]);
    expect(listed.sessions[0].title).toBe('Remember me');
    expect((await list('00'.repeat(32))).status).toBe(401);
  });

  it('lists a tool call waiting for approval and answers it with approve', async () => {
    const { seen } = renderChat({ server, session: 'approve' });
    await waitFor(() => expect(seen.current?.status).toBe('connected'), { timeout: 20_000 });
    await act(() => seen.current!.sendMessage('What time is it? demo.current_time {"zone": "Asia/Tokyo"}'));
    await waitFor(() => expect(seen.current?.approvals).toHaveLength(1), { timeout: 20_000 });
    const request = seen.current!.approvals[0];
    expect(request).toMatchObject({ server: 'demo', tool: 'current_time', arguments: { zone: 'Asia/Tokyo' } });
    expect(request.tokens).toBeGreaterThan(0);
    await expect(seen.current!.approve(request.approvalId, 'perhaps' as 'allow')).rejects.toMatchObject({
      code: 'invalid_approval',
    });
    await act(() => seen.current!.approve(request.approvalId, 'allow'));
    await waitFor(() => expect(replies(seen.current)).toHaveLength(1), { timeout: 20_000 });
    expect(seen.current!.approvals).toHaveLength(0);
    const rounds = replies(seen.current)[0].toolRounds as Array<{ exchanges: Array<{ result: string }> }>;
    expect(rounds[0].exchanges[0].result).toContain('Asia/Tokyo');
  });
});
