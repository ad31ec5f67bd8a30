//! `GET /ws`: the chat WebSocket. The first frame is `hello`; then `chat` and `retry` frames. Every
//! server frame carries a sync id; a client reconnecting with its last one gets the frames it missed,
//! then the `session` frame (or, when the gap is too old, `session` then a `snapshot`).
//!
//! Bad frames (malformed, unknown type, oversize, invalid) are answered with a typed `error` frame and
//! the socket stays open; nothing is stored for them.
//!
//! Streamed text is coalesced per connection: consecutive deltas of one message go out as one
//! frame at most every [`COALESCE`] (or once [`DELTA_FRAME_BYTES`] wait), carrying the last one's
//! sync id, so a fast provider's thousands of small pieces do not become thousands of events on
//! the host page. Any other frame sends the waiting text first; ids stay in order, and a client
//! resuming from a coalesced frame's id gets exactly what followed it.
//!
//! A heartbeat (`heartbeat`) keeps quiet connections alive through proxies and closes peers
//! that went silent.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use futures::{Sink, SinkExt, Stream, StreamExt};
use glassbox_core::context::SessionSettings;
use glassbox_core::decode::{DecodeError, decode_client_frame};
use glassbox_core::limits::MAX_FRAME_BYTES;
use glassbox_core::sync::Resume;

use crate::context_sets;
use glassbox_core::wire::{
    ClientFrame, ContextEvent, ContextReason, Hello, Preview, ServerEvent, ServerFrame,
    SessionList, Snapshot,
};
use tokio::sync::broadcast;
use tracing::Instrument;

use super::client_addr::ClientAddr;
use super::heartbeat::Heartbeat;
use crate::embed::service::Urgency;
use crate::error::AppError;
use crate::hub::delta_size::DELTA_FRAME_BYTES;
use crate::hub::{ClientLease, Hub};
use crate::identity::{IdentityError, VerifiedUser};
use crate::rate_limits::Caller;
use crate::sessions::{Ask, SessionError};
use crate::state::AppState;
use crate::wire_error::ToWire;

/// Longest time streamed text waits to be sent with the text after it (about one display frame).
const COALESCE: std::time::Duration = std::time::Duration::from_millis(16);

/// While the server shuts down, how often a connection looks whether its session's reply ended.
const CLOSING_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Frames above this size close the socket at the protocol level; between `MAX_FRAME_BYTES` and this
/// they get a typed `frame_too_large` error and the socket stays open.
const HARD_FRAME_LIMIT: usize = 1024 * 1024;

/// Upgrades to a WebSocket, for allowed origins only (403 `origin_not_allowed` before upgrading).
pub async fn upgrade(
    State(state): State<AppState>,
    headers: HeaderMap,
    ClientAddr(address): ClientAddr,
    ws: WebSocketUpgrade,
) -> Response {
    if let Err(e) = super::origin::check(&state, &headers, false) {
        return e.into_response();
    }
    // The connection keeps the upgrade request's span (and its request id) in every log line.
    let span = tracing::Span::current();
    ws.max_message_size(HARD_FRAME_LIMIT)
        .max_frame_size(HARD_FRAME_LIMIT)
        .on_upgrade(move |socket: WebSocket| {
            let (sink, stream) = socket.split();
            // A shutdown waits for it to send its last frames and close.
            let drain = state.drain.clone();
            drain.socket(serve(state, address, sink, stream).instrument(span))
        })
}

/// The socket closed (or failed); the connection ends.
struct Closed;

/// A connection inside a session: its outgoing side and what it has sent.
struct Attached {
    state: AppState,
    hub: Arc<Hub>,
    model: String,
    /// The verified user of the hello, if any (their sessions are reachable from here).
    user: Option<VerifiedUser>,
    /// Whom the per-client limits count: the user, else the address.
    caller: Option<Caller>,
    frames: broadcast::Receiver<Arc<ServerFrame>>,
    last_sent: u64,
    /// Streamed text not sent yet: deltas of one message merged, with the last one's sync id,
    /// and when the first of them came.
    waiting: Option<(ServerFrame, tokio::time::Instant)>,
    _lease: ClientLease,
}

/// Serves one connection from `address` (for the rate limits). Generic over the socket halves so
/// tests can drive it with channels.
pub async fn serve<W, R>(state: AppState, address: Option<IpAddr>, mut sink: W, mut stream: R)
where
    W: Sink<Message> + Unpin,
    R: Stream<Item = Result<Message, axum::Error>> + Unpin,
{
    let _open = state.metrics.websocket_opened();
    let mut attached: Option<Attached> = None;
    let mut beat = Heartbeat::new(state.config.ws_heartbeat);
    // Set when the server starts shutting down (`crate::drain`).
    let mut closing = false;
    loop {
        // Shutting down: closed once its session has no reply under way here and every frame
        // published is sent, so the client reconnects later and loses nothing.
        if closing && attached.as_ref().is_none_or(|a| !a.hub.stops.any()) {
            if let Some(a) = attached.as_mut() {
                // Every frame published so far goes first (the reply's end among them).
                loop {
                    let sent = match a.frames.try_recv() {
                        Ok(frame) => forward(&mut sink, a, &frame).await,
                        Err(broadcast::error::TryRecvError::Lagged(_)) => {
                            catch_up(&state, &mut sink, a).await
                        }
                        Err(_) => break,
                    };
                    if sent.is_err() {
                        return;
                    }
                }
                if flush(&mut sink, a).await.is_err() {
                    return;
                }
            }
            let _ = sink
                .send(Message::Close(Some(CloseFrame {
                    code: close_code::RESTART,
                    reason: "the server is restarting".into(),
                })))
                .await;
            return;
        }
        let incoming = match attached.as_mut() {
            None => tokio::select! {
                m = stream.next() => m,
                () = beat.due() => {
                    if beat.beat(&mut sink).await.is_err() { return; }
                    continue;
                }
                () = state.drain.begun(), if !closing => {
                    closing = true;
                    continue;
                }
            },
            Some(a) => {
                let due = a.waiting.as_ref().map(|(_, since)| *since + COALESCE);
                tokio::select! {
                    m = stream.next() => {
                        // Handling the frame may take a while: the text waiting goes first.
                        if flush(&mut sink, a).await.is_err() { return; }
                        m
                    }
                    f = a.frames.recv() => {
                        let sent = match f {
                            Ok(frame) => forward(&mut sink, a, &frame).await,
                            Err(broadcast::error::RecvError::Lagged(_)) => catch_up(&state, &mut sink, a).await,
                            Err(broadcast::error::RecvError::Closed) => Err(Closed),
                        };
                        if sent.is_err() { return; }
                        continue;
                    }
                    () = until(due) => {
                        if flush(&mut sink, a).await.is_err() { return; }
                        continue;
                    }
                    () = beat.due() => {
                        if flush(&mut sink, a).await.is_err() || beat.beat(&mut sink).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    () = state.drain.begun(), if !closing => {
                        closing = true;
                        continue;
                    }
                    // While closing, looks again now and then for the reply's end.
                    () = tokio::time::sleep(CLOSING_POLL), if closing => continue,
                }
            }
        };
        // Anything from the peer, a pong included, says it is alive.
        beat.heard();
        let text = match incoming {
            Some(Ok(Message::Text(t))) => t,
            Some(Ok(Message::Binary(b))) => match String::from_utf8(b.to_vec()) {
                Ok(t) => t.into(),
                Err(_) => {
                    let err = AppError::Decode(DecodeError::MalformedJson(
                        "binary frame is not UTF-8".into(),
                    ));
                    if send_error(&mut sink, attached.as_mut(), err, None)
                        .await
                        .is_err()
                    {
                        return;
                    }
                    continue;
                }
            },
            Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
            Some(Ok(_)) => continue, // ping/pong are answered by the library
        };
        let mut joining = false;
        let result = match decode_client_frame(&text) {
            Err(e) => Err(AppError::from(e)),
            Ok(frame) => {
                joining = matches!(&frame, ClientFrame::Hello(h) if h.session_id.is_some());
                handle(&state, address, &mut sink, &mut attached, frame).await
            }
        };
        if let Err(err) = result {
            // A join refused by its limit (checked with the token, before anything is read)
            // closes the connection: the client reconnects after its backoff, which grows while
            // it is refused. A new session refused by its limit keeps the socket, as before.
            let refused_join = joining
                && attached.is_none()
                && err.code() == glassbox_core::ErrorCode::RateLimited;
            let cid = client_message_id_of(&text);
            if send_error(&mut sink, attached.as_mut(), err, cid)
                .await
                .is_err()
                || refused_join
            {
                return;
            }
        }
    }
}

async fn handle<W: Sink<Message> + Unpin>(
    state: &AppState,
    address: Option<IpAddr>,
    sink: &mut W,
    attached: &mut Option<Attached>,
    frame: ClientFrame,
) -> Result<(), AppError> {
    match (frame, attached.as_ref()) {
        (ClientFrame::Hello(hello), None) => {
            let a = hello_to_session(state, address, sink, hello).await?;
            *attached = Some(a);
            Ok(())
        }
        (ClientFrame::Hello(_), Some(_)) => Err(AppError::Conflict(
            "this connection already joined a session",
        )),
        (_, None) => Err(AppError::HelloRequired),
        (ClientFrame::Chat(req), Some(a)) => state
            .chat
            .submit(&a.hub, &a.model, req, a.caller.as_ref(), None)
            .await
            .map(|_| ())
            .map_err(AppError::from),
        (ClientFrame::Retry(r), Some(a)) => Ok(state
            .chat
            .retry(&a.hub, &a.model, &r.message_id, a.caller.as_ref())
            .await?),
        // Every tab hears the end (`done`, status `stopped`); an ended reply is left as it is.
        (ClientFrame::Stop(s), Some(a)) => state
            .chat
            .stop(&a.hub, &s.message_id)
            .await
            .map(|_| ())
            .map_err(AppError::from),
        (ClientFrame::Settings(settings), Some(a)) => {
            state.limits.command(&a.hub.session_id).await?;
            let info = state
                .windows
                .update_compression(&a.hub.session_id, &a.model, settings)
                .await?;
            a.hub.publish(ServerEvent::ContextInfo(info));
            Ok(())
        }
        (ClientFrame::SetContext(args), Some(a)) => {
            state.limits.command(&a.hub.session_id).await?;
            context_sets::change(&state.store, &a.hub, &args).await?;
            Ok(())
        }
        // Every tab of it, this one included when it is this one, then hears that it is gone.
        (ClientFrame::DeleteSession(d), Some(a)) => {
            let id = state
                .sessions
                .reachable(&a.hub.session_id, d.session_id.as_deref(), a.user.as_ref())
                .await?;
            state.sessions.delete(&id).await?;
            if id == a.hub.session_id {
                return Ok(());
            }
            send_sessions(state, sink, attached).await
        }
        (ClientFrame::RenameSession(r), Some(a)) => {
            state.limits.command(&a.hub.session_id).await?;
            let id = state
                .sessions
                .reachable(&a.hub.session_id, r.session_id.as_deref(), a.user.as_ref())
                .await?;
            state.sessions.rename(&id, r.title.as_deref()).await?;
            if a.user.is_none() {
                return Ok(());
            }
            send_sessions(state, sink, attached).await
        }
        (ClientFrame::ListSessions(_), Some(a)) => {
            state.limits.command(&a.hub.session_id).await?;
            send_sessions(state, sink, attached).await
        }
        (ClientFrame::SetFilter(f), Some(a)) => {
            state.topics.set_filter(&a.hub, &f.labels).await?;
            Ok(())
        }
        (ClientFrame::SetSimilarityMode(m), Some(a)) => {
            state.topics.set_similarity_mode(&a.hub, &m).await?;
            Ok(())
        }
        (ClientFrame::MarkMessage(m), Some(a)) => {
            state
                .topics
                .mark_message(&a.hub, &m.message_id, m.mark)
                .await?;
            Ok(())
        }
        (ClientFrame::GetItems(_), Some(a)) => {
            let view = state.items.get(&a.hub.session_id).await?;
            let Some(a) = attached.as_mut() else {
                return Err(AppError::HelloRequired);
            };
            let frame = a.hub.private(ServerEvent::Items(view));
            send_private(sink, a, frame)
                .await
                .map_err(|_| AppError::Conflict("socket closed"))
        }
        (ClientFrame::AddItem(c), Some(a)) => {
            state.items.add(&a.hub, &c.item).await?;
            Ok(())
        }
        (ClientFrame::RemoveItem(c), Some(a)) => {
            state.items.remove(&a.hub, &c.item).await?;
            Ok(())
        }
        (ClientFrame::SetOverrides(o), Some(a)) => {
            state.items.set_overrides(&a.hub, o).await?;
            super::publish_context_info(state, &a.hub, &a.model).await
        }
        (ClientFrame::Preview(draft), Some(_)) => {
            let Some(a) = attached.as_mut() else {
                return Err(AppError::HelloRequired);
            };
            let receipt = state.turns.preview(&a.hub, &a.model, &draft).await?;
            let frame = a.hub.private(ServerEvent::Preview(Preview {
                client_message_id: draft.client_message_id,
                receipt: glassbox_core::wire::ReceiptJson::new(&receipt),
            }));
            send_private(sink, a, frame)
                .await
                .map_err(|_| AppError::Conflict("socket closed"))
        }
        // Every tab hears the decision (`approval`) once the waiting call takes it.
        (ClientFrame::Approve(answer), Some(a)) => Ok(state.approvals.answer(
            &a.hub.session_id,
            &answer.approval_id,
            answer.decision,
            answer.reason,
        )?),
        (ClientFrame::GetTopics(_), Some(_)) => {
            let Some(a) = attached.as_mut() else {
                return Err(AppError::HelloRequired);
            };
            state.limits.command(&a.hub.session_id).await?;
            send_topics(state, sink, a).await
        }
    }
}

/// Sends this connection its verified user's sessions (`unauthorized` without one).
async fn send_sessions<W: Sink<Message> + Unpin>(
    state: &AppState,
    sink: &mut W,
    attached: &mut Option<Attached>,
) -> Result<(), AppError> {
    let Some(a) = attached.as_mut() else {
        return Err(AppError::HelloRequired);
    };
    let user = a
        .user
        .as_ref()
        .ok_or(SessionError::Identity(IdentityError::NoUser))?;
    let sessions = state.sessions.list(user).await?;
    let frame = a
        .hub
        .private(ServerEvent::Sessions(SessionList { sessions }));
    send_private(sink, a, frame)
        .await
        .map_err(|_| AppError::Conflict("socket closed"))
}

/// Opens the session, answers `session`, then replays missed frames or sends a snapshot.
async fn hello_to_session<W: Sink<Message> + Unpin>(
    state: &AppState,
    address: Option<IpAddr>,
    sink: &mut W,
    hello: Hello,
) -> Result<Attached, AppError> {
    let ask = Ask {
        id: hello.session_id.as_deref(),
        token: hello.token.as_deref(),
        model: hello.model.as_deref(),
        agent: hello.agent.as_deref(),
        address,
        user: hello.user.as_ref(),
    };
    let open = state.sessions.join(ask).await?;
    // Subscribe before looking back, so nothing falls between replay and live frames.
    let mut a = Attached {
        state: state.clone(),
        frames: open.hub.subscribe(),
        _lease: open.hub.attach(),
        hub: open.hub,
        model: open.info.model.clone(),
        caller: Caller::of(open.user.as_ref(), address),
        user: open.user,
        last_sent: 0,
        waiting: None,
    };
    // Frames other instances wrote come first (ids numbered here follow them).
    a.hub.ready().await;
    let resume = match hello.last_sync_id {
        Some(seen) => a.hub.resume(seen).await,
        None => Resume::Snapshot,
    };
    let closed = |_| AppError::Conflict("socket closed");
    // Missed frames first (their ids are lower), then the session frame that ends the catch-up.
    if let Resume::Frames(frames) = &resume {
        for f in frames {
            forward(sink, &mut a, f).await.map_err(closed)?;
        }
    }
    let mut info = state.windows.with_context(open.info).await?;
    info.heartbeat_ms = super::heartbeat::interval_ms(state.config.ws_heartbeat);
    let session = a.hub.private(ServerEvent::Session(info));
    if resume == Resume::Snapshot {
        // Frames queued before it are in the snapshot that follows: the session frame goes alone
        // (the snapshot drops them), so no delta reaches the tab twice.
        send(sink, &session).await.map_err(closed)?;
        a.last_sent = session.sync_id;
    } else {
        send_private(sink, &mut a, session).await.map_err(closed)?;
    }
    if resume == Resume::Snapshot {
        send_snapshot(state, sink, &mut a).await?;
        // The footer's sets, once the history is in (`context` with `load`, docs/protocol.md).
        let context = state.store.settings(&a.hub.session_id).await?.context;
        let loaded = a.hub.private(ServerEvent::Context(ContextEvent {
            reason: ContextReason::Load,
            context,
            set_name: None,
        }));
        send_private(sink, &mut a, loaded).await.map_err(closed)?;
        // The agent's items and the session's choices, when the session has an agent (numbered
        // before they are read: a change published meanwhile comes after them).
        if state
            .store
            .settings(&a.hub.session_id)
            .await?
            .agent
            .is_some()
        {
            let id = a.hub.reserve();
            let settings = state.store.settings(&a.hub.session_id).await?;
            let frame = ServerFrame {
                sync_id: id,
                event: ServerEvent::Items(state.items.view(&settings)),
            };
            send_private(sink, &mut a, frame).await.map_err(closed)?;
        }
        // The bubble cloud and the filter, once the history is in (best effort: the session is
        // joined already; the panel fills with the next extraction).
        if let Err(e) = send_topics(state, sink, &mut a).await {
            tracing::warn!(session = %a.hub.session_id, error = %e, "topics not sent on hello");
        }
    }
    Ok(a)
}

/// Sends this connection the session's topics and the filter's view.
async fn send_topics<W: Sink<Message> + Unpin>(
    state: &AppState,
    sink: &mut W,
    a: &mut Attached,
) -> Result<(), AppError> {
    let closed = |_| AppError::Conflict("socket closed");
    state
        .topics
        .warm_before_view(&a.hub.session_id, Urgency::Now)
        .await?;
    // Numbered before they are read: a view published meanwhile is newer, and comes after them.
    let (ids, (topics, view)) = {
        let _order = a.hub.view_lock.lock().await;
        let ids = (a.hub.reserve(), a.hub.reserve());
        (ids, state.topics.topics_and_view(&a.hub.session_id).await?)
    };
    let frames = vec![
        ServerFrame {
            sync_id: ids.0,
            event: ServerEvent::Topics(topics),
        },
        ServerFrame {
            sync_id: ids.1,
            event: ServerEvent::Filter(view),
        },
    ];
    send_private_many(sink, a, frames).await.map_err(closed)
}

/// Sends the full history, numbered so that it reflects every frame up to its own id.
async fn send_snapshot<W: Sink<Message> + Unpin>(
    state: &AppState,
    sink: &mut W,
    a: &mut Attached,
) -> Result<(), AppError> {
    let (sync_id, partial) = a
        .hub
        .snapshot_point()
        .await
        .map_err(crate::storage::StorageError::from)?;
    let mut messages = state.store.messages(&a.hub.session_id).await?;
    for m in &mut messages {
        if let Some(text) = partial.get(&m.id) {
            m.content = text.clone();
        }
    }
    let frame = ServerFrame {
        sync_id,
        event: ServerEvent::Snapshot(Snapshot {
            messages,
            approvals: state.approvals.pending(&a.hub.session_id),
        }),
    };
    let closed = |_| AppError::Conflict("socket closed");
    // Frames numbered before the snapshot are already reflected in it; those numbered after it
    // that were queued meanwhile (deltas streamed while the history was read) follow it.
    let later = drain_before(sink, a, sync_id, false)
        .await
        .map_err(closed)?;
    // Text still waiting is in the snapshot too (numbered before it).
    a.waiting = None;
    send(sink, &frame).await.map_err(closed)?;
    a.last_sent = sync_id;
    for f in later {
        forward(sink, a, &f).await.map_err(closed)?;
    }
    Ok(())
}

/// Sends a session frame unless this connection already has it.
async fn forward<W: Sink<Message> + Unpin>(
    sink: &mut W,
    a: &mut Attached,
    frame: &ServerFrame,
) -> Result<(), Closed> {
    if frame.sync_id <= a.last_sent {
        return Ok(());
    }
    // Settings are the session's; the window and vocabulary are this connection's model's.
    let localized;
    let frame = match &frame.event {
        ServerEvent::ContextInfo(info) if info.model != a.model => {
            // The session's agent and overrides count too (its prompt, its longest reply); the
            // compression settings are the frame's. Without the record, those alone.
            let settings = SessionSettings {
                compression: info.compression,
                ..a.state
                    .store
                    .settings(&a.hub.session_id)
                    .await
                    .unwrap_or_default()
            };
            localized = ServerFrame {
                sync_id: frame.sync_id,
                event: ServerEvent::ContextInfo(a.state.windows.info_with(
                    &a.hub.session_id,
                    &a.model,
                    &settings,
                )),
            };
            &localized
        }
        _ => frame,
    };
    if let ServerEvent::Delta(delta) = &frame.event {
        a.last_sent = frame.sync_id;
        match &mut a.waiting {
            Some((
                ServerFrame {
                    sync_id,
                    event: ServerEvent::Delta(w),
                },
                _,
            )) if w.message_id == delta.message_id => {
                w.text.push_str(&delta.text);
                *sync_id = frame.sync_id;
            }
            _ => {
                flush(sink, a).await?;
                a.waiting = Some((frame.clone(), tokio::time::Instant::now()));
            }
        }
        let full = matches!(&a.waiting, Some((ServerFrame { event: ServerEvent::Delta(w), .. }, _)) if w.text.len() >= DELTA_FRAME_BYTES);
        if full {
            flush(sink, a).await?;
        }
        return Ok(());
    }
    flush(sink, a).await?;
    send(sink, frame).await?;
    a.last_sent = frame.sync_id;
    Ok(())
}

/// Sends the streamed text waiting, if any.
async fn flush<W: Sink<Message> + Unpin>(sink: &mut W, a: &mut Attached) -> Result<(), Closed> {
    match a.waiting.take() {
        Some((frame, _)) => send(sink, &frame).await,
        None => Ok(()),
    }
}

/// Waits until `due`, or forever when nothing is due.
async fn until(due: Option<tokio::time::Instant>) {
    match due {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Sends a connection-only frame in id order: session frames numbered before it go first.
async fn send_private<W: Sink<Message> + Unpin>(
    sink: &mut W,
    a: &mut Attached,
    frame: ServerFrame,
) -> Result<(), Closed> {
    send_private_many(sink, a, vec![frame]).await
}

/// Sends connection-only frames (in increasing id order) merged with the queued session frames by
/// id, so that every frame goes out in id order and none is numbered below one already sent.
async fn send_private_many<W: Sink<Message> + Unpin>(
    sink: &mut W,
    a: &mut Attached,
    frames: Vec<ServerFrame>,
) -> Result<(), Closed> {
    let Some(first) = frames.first().map(|f| f.sync_id) else {
        return Ok(());
    };
    let mut later = drain_before(sink, a, first, true)
        .await?
        .into_iter()
        .peekable();
    for frame in frames {
        while let Some(f) = later.next_if(|f| f.sync_id < frame.sync_id) {
            forward(sink, a, &f).await?;
        }
        flush(sink, a).await?;
        send(sink, &frame).await?;
        a.last_sent = frame.sync_id;
    }
    for f in later {
        forward(sink, a, &f).await?;
    }
    Ok(())
}

/// Takes every queued session frame; those numbered before `id` are sent (or skipped if `!send_them`),
/// the rest are returned to be sent after the frame numbered `id`.
async fn drain_before<W: Sink<Message> + Unpin>(
    sink: &mut W,
    a: &mut Attached,
    id: u64,
    send_them: bool,
) -> Result<Vec<Arc<ServerFrame>>, Closed> {
    let mut queued = Vec::new();
    loop {
        match a.frames.try_recv() {
            Ok(f) => queued.push(f),
            // The queue overflowed while this connection was busy (a hello reading a long history
            // while a reply streams): the frames it dropped are still in the replay log, after the
            // last one this connection has. (Past the log, they are gone; so were they before.)
            Err(broadcast::error::TryRecvError::Lagged(_)) => {
                if let Resume::Frames(logged) = a.hub.resume(a.last_sent).await {
                    queued.extend(logged);
                }
            }
            Err(_) => break,
        }
    }
    // In id order, each once (the log and the queue may both hold a frame).
    queued.sort_by_key(|f| f.sync_id);
    queued.dedup_by_key(|f| f.sync_id);
    let mut later = Vec::new();
    for f in queued {
        if f.sync_id >= id {
            later.push(f);
        } else if send_them {
            forward(sink, a, &f).await?;
        }
    }
    Ok(later)
}

/// After falling behind the broadcast, replays from the log (or sends a snapshot).
async fn catch_up<W: Sink<Message> + Unpin>(
    state: &AppState,
    sink: &mut W,
    a: &mut Attached,
) -> Result<(), Closed> {
    match a.hub.resume(a.last_sent).await {
        Resume::Frames(frames) => {
            for f in &frames {
                forward(sink, a, f).await?;
            }
            Ok(())
        }
        Resume::Snapshot => send_snapshot(state, sink, a).await.map_err(|_| Closed),
    }
}

/// The `clientMessageId` of a refused frame, if it can be read, so the client can mark that message.
fn client_message_id_of(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let cid = value.pointer("/data/clientMessageId")?.as_str()?;
    (cid.len() <= glassbox_core::limits::MAX_CLIENT_MESSAGE_ID).then(|| cid.to_owned())
}

async fn send_error<W: Sink<Message> + Unpin>(
    sink: &mut W,
    attached: Option<&mut Attached>,
    err: AppError,
    client_message_id: Option<String>,
) -> Result<(), Closed> {
    let mut wire = err.to_wire();
    wire.client_message_id = client_message_id;
    let event = ServerEvent::Error(wire);
    match attached {
        Some(a) => {
            let frame = a.hub.private(event);
            send_private(sink, a, frame).await
        }
        // Before hello there is no session to number frames in.
        None => send(sink, &ServerFrame { sync_id: 0, event }).await,
    }
}

async fn send<W: Sink<Message> + Unpin>(sink: &mut W, frame: &ServerFrame) -> Result<(), Closed> {
    let text = serde_json::to_string(frame).map_err(|_| Closed)?;
    sink.send(Message::Text(text.into()))
        .await
        .map_err(|_| Closed)
}

const _: () = assert!(MAX_FRAME_BYTES < HARD_FRAME_LIMIT);
