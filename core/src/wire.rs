//! Wire types spoken between the widget and the server, over WebSocket and REST/SSE.
//!
//! Every frame is `{"type": "...", "data": {...}}`; server frames also carry `syncId`.
//! `docs/protocol.md` describes the protocol in prose; these types are the source of truth.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::context::TurnMessage;
use crate::error::ErrorCode;
use crate::prompt::attachments_segment;
use crate::vocab::{
    ApprovalDecision, Attachment, MessageStatus, PageContext, Role, ToolCallApproval, ToolExchange,
    ToolRound, Usage,
};

/// A frame sent by the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, strum::VariantNames)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ClientFrame {
    /// First frame of every connection: opens or resumes a session.
    Hello(Hello),
    /// A user message.
    Chat(ChatRequest),
    /// Regenerate a failed or stopped assistant reply in place.
    Retry(RetryRequest),
    /// Stop a reply while it streams (or waits its turn): the provider's stream is cancelled, no
    /// further tool call runs, a waiting approval is withdrawn, and every tab receives `done`
    /// with the reply as it stands, status `stopped`. A reply that already ended is left as it is.
    Stop(StopRequest),
    /// Change the session's compression settings (persisted; every tab receives `context_info`).
    Settings(crate::context::CompressionSettings),
    /// Change one context set (the host's `setContext`); every tab receives `context`.
    SetContext(crate::context::sets::SetContextArgs),
    /// Delete the session and everything in it now (`data: {}`); every tab then receives the
    /// `unauthorized` error "this session was deleted" and starts afresh.
    DeleteSession(DeleteSession),
    /// Select topics (labels of the session's topics; empty clears the filter); every tab receives
    /// `filter`.
    SetFilter(SetFilter),
    /// Ask for the session's topics and filter (`data: {}`): answered with `topics` and `filter`.
    GetTopics(Empty),
    /// Switch similarity mode for this session; every tab receives `filter`.
    SetSimilarityMode(SetSimilarityMode),
    /// Pin or exclude one message, or clear its mark; every tab receives `mark` and `filter`.
    MarkMessage(MarkMessage),
    /// Ask for the agent's items and the session's choices (`data: {}`): answered with `items`.
    GetItems(Empty),
    /// Add one of the agent's items to the session (as `manual`); every tab receives `items`.
    AddItem(ItemChange),
    /// Remove an item from the session, whatever brought it in; every tab receives `items`.
    RemoveItem(ItemChange),
    /// Replace the session's overrides of its agent's defaults (a field left out keeps the
    /// default); every tab receives `items` and `context_info`.
    SetOverrides(crate::context::agent_settings::SessionOverrides),
    /// Plan a draft as `chat` would, without storing it or calling the provider: answered (to
    /// this connection) with `preview`, the receipt the turn would have now. `clientMessageId`,
    /// when given, comes back with it (so an answer to an older draft can be told apart).
    Preview(ChatRequest),
    /// Answer an `approval_request`: every tab then receives `approval`. An unknown or already
    /// answered `approvalId` changes nothing (the first answer wins).
    Approve(Approve),
    /// Ask for the verified user's sessions (`data: {}`): answered, to this connection only, with
    /// `sessions`. `unauthorized` on a connection without a verified user.
    ListSessions(Empty),
    /// Rename one of the verified user's sessions (or this connection's session); a `null` or
    /// blank title returns it to its first message. Answered with `sessions` when a user is verified.
    RenameSession(RenameSession),
}

/// A user the host's backend vouches for: `hash` is the hex HMAC-SHA256 of the UTF-8 `id` under
/// the server's `GLASSBOX_IDENTITY_SECRET` (either case). docs/embedding.md shows how to make it.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserClaim {
    /// The host's own id of the user: 1–128 characters.
    pub id: String,
    /// A missing hash reads as empty (and is refused as a wrong one).
    #[serde(default)]
    pub hash: String,
}

impl std::fmt::Debug for UserClaim {
    /// The hash is a credential: logs show the id only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserClaim")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// The longest title a session keeps (characters); longer ones are cut.
pub const MAX_TITLE_CHARS: usize = 80;

/// A session's title made from `text` (a rename, or its first user message): control characters
/// left out, runs of white space made one space, cut to [`MAX_TITLE_CHARS`] characters (an ellipsis
/// marks a cut).
pub fn session_title(text: &str) -> String {
    // Control characters (NUL among them) are left out; white space stays a word break.
    let text: String = text
        .chars()
        .filter(|c| !c.is_control() || c.is_whitespace())
        .collect();
    let mut words = text
        .split_whitespace()
        .flat_map(|w| [" ", w])
        .skip(1)
        .flat_map(str::chars);
    let mut title: String = words.by_ref().take(MAX_TITLE_CHARS).collect();
    if words.next().is_some() {
        title.pop();
        title.push('…');
    }
    title
}

/// A session's new title.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RenameSession {
    /// The session to rename: this connection's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// At most [`MAX_TITLE_CHARS`] characters are kept; `null` or blank: the first message again.
    pub title: Option<String>,
}

/// One of a verified user's sessions, as the session drawer lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionSummary {
    pub session_id: String,
    /// The user's title, else the first user message cut to [`MAX_TITLE_CHARS`] characters.
    pub title: String,
    /// When the last message was written (ms since the Unix epoch; the creation for an empty one).
    pub updated_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// A verified user's sessions, newest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionList {
    pub sessions: Vec<SessionSummary>,
}

/// Read through a JSON value the browser's first load already knows how to read, by hand: derived
/// readers for these two structs cost the widget's first load 2 kB (brotli) for a frame only the
/// session drawer (a chunk) shows.
impl<'de> Deserialize<'de> for SessionList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        use serde_json::Value;
        let value = Value::deserialize(d)?;
        let missing =
            |field: &str| D::Error::custom(format!("sessions: missing or wrong `{field}`"));
        let text = |v: &Value, field: &str| {
            v.get(field)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| missing(field))
        };
        let list = value
            .get("sessions")
            .and_then(Value::as_array)
            .ok_or_else(|| missing("sessions"))?;
        let sessions = list
            .iter()
            .map(|v| {
                Ok(SessionSummary {
                    session_id: text(v, "sessionId")?,
                    title: text(v, "title")?,
                    updated_at: v
                        .get("updatedAt")
                        .and_then(Value::as_i64)
                        .ok_or_else(|| missing("updatedAt"))?,
                    agent: match v.get("agent") {
                        None | Some(Value::Null) => None,
                        Some(_) => Some(text(v, "agent")?),
                    },
                })
            })
            .collect::<Result<_, D::Error>>()?;
        Ok(SessionList { sessions })
    }
}

/// The user's answer to an `approval_request`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Approve {
    pub approval_id: String,
    /// `allow`, `deny` or `allow_session` (the other decisions are the server's).
    pub decision: ApprovalDecision,
    /// Why, for a denial: the model is told it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A tool call waiting for the user's yes (the session's tool permission is `ask`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    /// The reply that made the call.
    pub message_id: String,
    /// The server's opaque id of this approval (not the provider's call id).
    pub approval_id: String,
    /// The MCP server and its own name for the tool.
    pub server: String,
    pub tool: String,
    /// The tool's title, when its server gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool's description, as its server gives it.
    pub description: String,
    /// The call's arguments (the JSON the model wrote; a text when it is not JSON).
    pub arguments: serde_json::Value,
    /// The tool's annotations (`readOnlyHint`, …): the server's claims, not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<serde_json::Value>,
    /// What the tool's definition costs in every request that offers it (tokens).
    pub tokens: u32,
    /// When the wait ends as a denial (milliseconds since the Unix epoch).
    pub expires_at: i64,
}

/// An approval was decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalDecided {
    pub approval_id: String,
    pub message_id: String,
    pub decision: ApprovalDecision,
    /// The `approval` message that keeps the decision in the history (stored after the reply).
    pub message: ChatMessage,
}

/// The answer to `preview`: the receipt a turn answering the draft would have now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    /// The draft's `clientMessageId`, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_message_id: Option<String>,
    pub receipt: ReceiptJson,
}

/// The item `add_item` and `remove_item` name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ItemChange {
    pub item: crate::context::items::ItemRef,
}

/// The session's agent's items and the session's choices: what the session drawer shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemsView {
    /// The session's agent (`None`: the server configures none, or no longer this one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Every item of the agent, by priority.
    pub available: Vec<crate::context::items::AgentItem>,
    /// The items in the session and how each came in.
    pub session: Vec<crate::context::items::SessionItem>,
    /// The agent's defaults.
    pub defaults: crate::context::agent_settings::AgentSettings,
    /// The session's overrides of them.
    pub overrides: crate::context::agent_settings::SessionOverrides,
}

/// Data of frames that carry none (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// The labels a filter selects.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SetFilter {
    pub labels: Vec<String>,
}

/// Similarity mode on or off, and optionally the session's similarity threshold (the cosine a
/// message needs to match a selected topic, 0–1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SetSimilarityMode {
    pub enabled: bool,
    /// Absent (`None`) keeps the session's threshold, `null` (`Some(None)`) returns it to the
    /// server's, a number (`Some(Some(t))`) sets it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub threshold: Option<Option<f32>>,
}

/// A field that is present, `null` or not: `Some(None)` for `null`, so that it differs from an
/// absent one (`None`, by `#[serde(default)]`).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A message's mark (`null` clears it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MarkMessage {
    pub message_id: String,
    pub mark: Option<crate::context::MessageMark>,
}

/// The data of a `delete_session` frame: `{}` deletes this connection's session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteSession {
    /// Another of the verified user's sessions (answered with `sessions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// Opens a new session (no id) or resumes one (id + token, or id + the verified user who owns
/// it), optionally replaying missed frames.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hello {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The highest `syncId` this client has seen; frames after it are replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync_id: Option<u64>,
    /// The model to reply with; must be allowed by the server. The server's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The agent a new session is for: one the server configures; its first agent when absent.
    /// An existing session keeps the agent it was created with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// A verified user: a new session is theirs, and theirs resume without a token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<UserClaim>,
}

/// A user message with optional page context and attachments.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChatRequest {
    /// The user-visible text, exactly as typed.
    pub message: String,
    /// Host page context: reaches the model as delimited data, never stored in `message`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub context: Option<PageContext>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// Client-chosen idempotency key: the same key never creates a second message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_message_id: Option<String>,
}

/// Asks the server to regenerate a failed or stopped assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryRequest {
    pub message_id: String,
}

/// Asks the server to stop an assistant reply that is streaming.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StopRequest {
    pub message_id: String,
}

/// A stored chat message, as shown to the user. `content` never contains page context.
/// `Default` is an empty, complete user message (build others with `..Default::default()`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChatMessage {
    pub id: String,
    pub role: Role,
    pub content: String,
    pub status: MessageStatus,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_message_id: Option<String>,
    /// For assistant messages: the user message this replies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// The page context sent with a user message, kept for host display hints
    /// (docs/context-planning.md, Page context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub context: Option<PageContext>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// For assistant messages: what the request carried and left out, and our count (beside
    /// `usage`). Replies stored before receipts have only the totals (`contextReport` then).
    #[serde(
        default,
        alias = "contextReport",
        skip_serializing_if = "Option::is_none"
    )]
    pub receipt: Option<ReceiptJson>,
    /// A reply's tool rounds, in order (each exchange is shown as one collapsed line).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_rounds: Vec<ToolRound>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<WireError>,
    /// The user's mark: pinned (always sent) or excluded (never sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<crate::context::MessageMark>,
    /// For `approval` messages: the decisions about a reply's tool calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<ToolCallApproval>,
}

impl ChatMessage {
    /// True for the stored messages the model sees: user messages, complete replies, and stopped
    /// replies with text (the user read it); a failed or still-streaming reply is never sent.
    pub fn reaches_model(&self) -> bool {
        match self.role {
            Role::User => true,
            Role::Assistant => match self.status {
                MessageStatus::Complete => true,
                MessageStatus::Stopped => !self.content.trim().is_empty(),
                MessageStatus::Streaming | MessageStatus::Failed => false,
            },
            Role::Approval => false,
        }
    }

    /// The message as the plan reads it (see [`TurnMessage`]).
    pub fn as_turn(&self) -> TurnMessage<'_> {
        TurnMessage {
            id: Some(&self.id),
            role: self.role,
            text: Cow::Borrowed(&self.content),
            attachments: &self.attachments,
            rounds: &self.tool_rounds,
        }
    }

    /// The message flattened to one text (its words, then its attachment part): the form the
    /// summary call reads a transcript in. Requests keep the parts apart (`prompt::replay`).
    pub fn flat_text(&self) -> Cow<'_, str> {
        if self.attachments.is_empty() {
            return Cow::Borrowed(&self.content);
        }
        Cow::Owned(format!(
            "{}\n\n{}",
            self.content,
            attachments_segment(&self.attachments)
        ))
    }
}

/// A [`Receipt`](crate::context::Receipt) as messages and previews carry it: its JSON, read when
/// asked. The browser reads a receipt's parts only in "View context", the draft's preview and the
/// meter's arithmetic, all chunks; keeping receipts as JSON until then keeps the receipt's parser
/// out of the widget's first download (docs/architecture.md, "app in layers"). The server
/// passes stored receipts through without reading them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReceiptJson(serde_json::Value);

impl ReceiptJson {
    /// The receipt as JSON.
    pub fn new(receipt: &crate::context::Receipt) -> Self {
        // A receipt's maps all have string keys: writing it as a JSON value cannot fail.
        Self(serde_json::to_value(receipt).unwrap_or_default())
    }

    /// The receipt; an error when the JSON is not one.
    pub fn read(&self) -> Result<crate::context::Receipt, serde_json::Error> {
        crate::context::Receipt::deserialize(&self.0)
    }

    /// Just the totals (our count, its breakdown, compression), read without the parts; `None`
    /// when the JSON is not a receipt.
    pub fn totals(&self) -> Option<crate::context::ContextReport> {
        crate::context::ContextReport::deserialize(&self.0).ok()
    }
}

/// A typed error as sent on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WireError {
    pub code: ErrorCode,
    pub message: String,
    /// Whether repeating the same action may succeed.
    pub retryable: bool,
    /// The message this error concerns (a failed reply), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// The `clientMessageId` of the chat frame that was refused, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_message_id: Option<String>,
    /// For `rate_limited` and the daily `budget_exhausted`: milliseconds until the same action may
    /// succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl WireError {
    /// An error about no particular message; retryability follows the code.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retryable: code.retryable(),
            message_id: None,
            client_message_id: None,
            retry_after_ms: None,
        }
    }

    /// The same error, attached to a message.
    pub fn for_message(mut self, message_id: impl Into<String>) -> Self {
        self.message_id = Some(message_id.into());
        self
    }
}

/// A frame sent by the server. `sync_id` increases monotonically within a session. Read by the
/// hand-written reader in `server_frame` (no buffered copy of the payload).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerFrame {
    pub sync_id: u64,
    #[serde(flatten)]
    pub event: ServerEvent,
}

/// What a server frame says. Its name (`&'static str` from `&ServerEvent`) is the frame's `type`.
#[derive(Debug, Clone, PartialEq, Serialize, strum::IntoStaticStr, strum::VariantNames)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ServerEvent {
    /// Answer to `hello`: the session in use. `token` is present only when the session was just created.
    Session(SessionInfo),
    /// The full history, sent when a client connects fresh or is too far behind to replay.
    Snapshot(Snapshot),
    /// A user message was stored (or had already been stored: `duplicate`).
    Accepted(Accepted),
    /// An assistant reply begins (also on retry, reusing the failed message's id).
    ReplyStart(ReplyStart),
    /// A piece of reply text.
    Delta(Delta),
    /// The reply completed and is stored.
    Done(Done),
    /// Something failed; with `messageId` when a reply failed (its partial text is kept).
    Error(WireError),
    /// The session's context parameters changed (compression settings): the meter's inputs for
    /// this connection's model.
    ContextInfo(crate::context::ContextInfo),
    /// The session's context sets: after history loads, on the first message after a resume, and
    /// after every change (a tool, REST, the host page).
    Context(ContextEvent),
    /// A tool exchange of a streaming reply finished (it is also in the reply's `toolRounds`).
    Tool(ToolEvent),
    /// The session's token budget after a reply spent from it (when the server sets one).
    Budget(SessionBudget),
    /// The session's topics: after each extraction, on `get_topics`, and after history loads.
    Topics(crate::context::SessionTopics),
    /// The topic filter and the history it lets through: after every change of the filter,
    /// similarity mode or a mark, and after each extraction (so new messages are counted).
    Filter(crate::context::FilterView),
    /// A message's mark changed.
    Mark(MarkMessage),
    /// The agent's items and the session's choices: on `get_items`, after history loads, and
    /// after every change of the session's items or overrides.
    Items(ItemsView),
    /// The answer to `preview` (to the connection that asked).
    Preview(Preview),
    /// A tool call waits for the user's answer (`approve`); sent to every tab, and again in the
    /// snapshot while it waits.
    ApprovalRequest(ApprovalRequest),
    /// An approval was decided (by a user in any tab, or by the server: timed out, cancelled).
    Approval(ApprovalDecided),
    /// The WebSocket is alive (every `heartbeatMs`, beside a ping browsers hide from pages): not
    /// numbered (`syncId` 0), never replayed; nothing to apply.
    Heartbeat(Empty),
    /// The verified user's sessions (to the connection that asked, or that renamed or deleted one).
    Sessions(SessionList),
}

impl ServerFrame {
    /// The heartbeat frame (not numbered).
    pub fn heartbeat() -> Self {
        Self {
            sync_id: 0,
            event: ServerEvent::Heartbeat(Empty {}),
        }
    }
}

/// Why a `context` event was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextReason {
    Load,
    Resume,
    Changed,
}

/// The session's context sets, whole, for the footer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextEvent {
    pub reason: ContextReason,
    pub context: crate::context::sets::ContextSets,
    /// The set that changed (`changed` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_name: Option<String>,
}

/// A finished tool exchange of reply `message_id`, in round `round` (0-based).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEvent {
    pub message_id: String,
    pub round: u32,
    /// Where the round sits in the reply's text (bytes).
    pub at: u32,
    pub exchange: ToolExchange,
}

/// The version of this protocol a server speaks (`session.protocol`): it changes when a client must
/// learn something new to keep working (CHANGELOG.md says what). 1: the first numbered, with `stop`.
pub const PROTOCOL_VERSION: u32 = 1;

/// The session a connection works in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionInfo {
    pub session_id: String,
    /// The protocol version the server speaks ([`PROTOCOL_VERSION`]); 0 from a server older than
    /// the numbering.
    #[serde(default)]
    pub protocol: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The model replies come from.
    pub model: String,
    /// The agent the session is for, when the server configures agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Context window, counting vocabulary and compression settings, for the token meter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub context: Option<crate::context::ContextInfo>,
    /// The session's token budget, when the server sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<SessionBudget>,
    /// On the WebSocket: how often the server sends `heartbeat` (ms); a client that hears nothing
    /// for three of these reconnects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_ms: Option<u32>,
    /// The verified user the session is opened for (their id), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The agent's [`Greeting`]: the composer's placeholder, the welcome line, the starters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub welcome: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub starters: Vec<String>,
}

/// What a chat shows before its first message: the composer's placeholder, a welcome line (shown,
/// never sent to the model) and up to four starter prompts (a click sends one). An agent sets them
/// (they come in `session`); the host's own override each (docs/agents.md, "Their own words").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Greeting {
    pub placeholder: Option<String>,
    pub welcome: Option<String>,
    pub starters: Vec<String>,
}

impl Greeting {
    /// At most this many starters.
    pub const MAX_STARTERS: usize = 4;
    /// The longest placeholder and starter (characters).
    pub const MAX_LINE_CHARS: usize = 200;
    /// The longest welcome (characters).
    pub const MAX_WELCOME_CHARS: usize = 2_000;

    /// What is wrong with a greeting an operator wrote, if anything.
    pub fn check(&self) -> Result<(), String> {
        let long = |t: &str, max: usize| t.chars().count() > max;
        for (field, text, max) in [
            ("placeholder", &self.placeholder, Self::MAX_LINE_CHARS),
            ("welcome", &self.welcome, Self::MAX_WELCOME_CHARS),
        ] {
            if text.as_deref().is_some_and(|t| long(t, max)) {
                return Err(format!("{field}: at most {max} characters"));
            }
        }
        if self.starters.len() > Self::MAX_STARTERS {
            return Err(format!("starters: at most {}", Self::MAX_STARTERS));
        }
        if self
            .starters
            .iter()
            .enumerate()
            .any(|(i, s)| self.starters[..i].contains(s))
        {
            return Err("starters: each once".to_owned());
        }
        match self
            .starters
            .iter()
            .find(|s| s.trim().is_empty() || long(s, Self::MAX_LINE_CHARS))
        {
            Some(_) => Err(format!(
                "starters: each 1–{} characters",
                Self::MAX_LINE_CHARS
            )),
            None => Ok(()),
        }
    }

    /// The greeting cut to the limits (a host's: what a page gives is shown, within bounds).
    pub fn bounded(mut self) -> Self {
        let cut = |t: String, max: usize| t.chars().take(max).collect::<String>();
        self.placeholder = self.placeholder.map(|p| cut(p, Self::MAX_LINE_CHARS));
        self.welcome = self.welcome.map(|w| cut(w, Self::MAX_WELCOME_CHARS));
        let mut starters: Vec<String> = Vec::with_capacity(Self::MAX_STARTERS);
        for s in self.starters.drain(..).filter(|s| !s.trim().is_empty()) {
            let s = cut(s, Self::MAX_LINE_CHARS);
            if starters.len() < Self::MAX_STARTERS && !starters.contains(&s) {
                starters.push(s);
            }
        }
        self.starters = starters;
        self
    }

    /// Each of this greeting's parts, else `fallback`'s (the host's over the agent's).
    pub fn or(&self, fallback: &Greeting) -> Greeting {
        Greeting {
            placeholder: self
                .placeholder
                .clone()
                .or_else(|| fallback.placeholder.clone()),
            welcome: self.welcome.clone().or_else(|| fallback.welcome.clone()),
            starters: if self.starters.is_empty() {
                fallback.starters.clone()
            } else {
                self.starters.clone()
            },
        }
    }

    /// The agent's greeting a `session` frame carries.
    pub fn of(info: &SessionInfo) -> Greeting {
        Greeting {
            placeholder: info.placeholder.clone(),
            welcome: info.welcome.clone(),
            starters: info.starters.clone(),
        }
    }
}

/// Tokens (input + output) a session may spend, and has spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionBudget {
    pub limit: u64,
    pub used: u64,
}

impl SessionBudget {
    /// Tokens left (none when used up or over).
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }
}

/// Every message of the session, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub messages: Vec<ChatMessage>,
    /// Tool calls waiting for the user's answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<ApprovalRequest>,
}

/// A stored user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    pub message: ChatMessage,
    /// True when this `clientMessageId` had been stored before; no new reply is started.
    #[serde(default)]
    pub duplicate: bool,
}

/// Start of an assistant reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplyStart {
    pub message_id: String,
    pub reply_to: String,
    pub created_at: i64,
}

/// A piece of streamed reply text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delta {
    pub message_id: String,
    pub text: String,
}

/// A completed reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Done {
    pub message: ChatMessage,
}

/// Body of `POST /api/chat` (REST twin of the `chat` frame).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RestChatRequest {
    /// Existing session to post into (with `Authorization: Bearer <token>`); a new one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The agent of a new session (see [`Hello::agent`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(flatten)]
    pub chat: ChatRequest,
}

/// Body of `POST /api/sessions` (may be left out).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewSession {
    /// The agent the session is for (see [`Hello::agent`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// JSON answer of `POST /api/chat` without `Accept: text/event-stream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RestChatResponse {
    pub session: SessionInfo,
    pub message: ChatMessage,
    /// The assistant reply; `status` is `failed` (with `error`) if the provider failed.
    pub reply: Option<ChatMessage>,
    #[serde(default)]
    pub duplicate: bool,
}

/// Body of a JSON error response: `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub error: WireError,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chat_frame_parses_the_documented_shape() {
        let raw = json!({"type": "chat", "data": {"message": "What does this model do?",
            "context": {"page": "pack-detail", "entity": "Illustrious-XL"},
            "attachments": [{"name": "a.png", "mimeType": "image/png"}], "clientMessageId": "c1"}});
        let frame: ClientFrame = serde_json::from_value(raw).unwrap();
        let ClientFrame::Chat(chat) = frame else {
            panic!("not chat")
        };
        assert_eq!(chat.message, "What does this model do?");
        assert_eq!(chat.context.unwrap()["entity"], "Illustrious-XL");
        assert_eq!(chat.attachments[0].mime_type.as_deref(), Some("image/png"));
        assert_eq!(chat.client_message_id.as_deref(), Some("c1"));
    }

    #[test]
    fn chat_without_context_or_attachments_is_valid() {
        let frame: ClientFrame =
            serde_json::from_value(json!({"type": "chat", "data": {"message": "hi"}})).unwrap();
        assert_eq!(
            frame,
            ClientFrame::Chat(ChatRequest {
                message: "hi".into(),
                ..Default::default()
            })
        );
    }

    #[test]
    fn server_frame_carries_sync_id_type_and_data() {
        let frame = ServerFrame {
            sync_id: 7,
            event: ServerEvent::Delta(Delta {
                message_id: "m".into(),
                text: "he".into(),
            }),
        };
        let v = serde_json::to_value(&frame).unwrap();
        assert_eq!(
            v,
            json!({"syncId": 7, "type": "delta", "data": {"messageId": "m", "text": "he"}})
        );
        let back: ServerFrame = serde_json::from_value(v).unwrap();
        assert_eq!(back, frame);
    }

    #[test]
    fn unknown_frame_type_is_rejected() {
        assert!(
            serde_json::from_value::<ClientFrame>(json!({"type": "nope", "data": {}})).is_err()
        );
    }

    #[test]
    fn a_threshold_absent_null_or_given_reads_three_ways() {
        let read = |v| {
            serde_json::from_value::<SetSimilarityMode>(v)
                .unwrap()
                .threshold
        };
        assert_eq!(read(json!({"enabled": true})), None);
        assert_eq!(
            read(json!({"enabled": true, "threshold": null})),
            Some(None)
        );
        assert_eq!(
            read(json!({"enabled": true, "threshold": 0.5})),
            Some(Some(0.5))
        );
        assert!(
            serde_json::from_value::<SetSimilarityMode>(json!({"enabled": true, "threshold": "x"}))
                .is_err()
        );
        for t in [None, Some(None), Some(Some(0.5))] {
            let m = SetSimilarityMode {
                enabled: false,
                threshold: t,
            };
            let back: SetSimilarityMode =
                serde_json::from_value(serde_json::to_value(&m).unwrap()).unwrap();
            assert_eq!(back, m);
        }
    }

    #[test]
    fn rest_request_flattens_chat_fields() {
        let r: RestChatRequest =
            serde_json::from_value(json!({"sessionId": "s", "message": "m", "context": {"a": 1}}))
                .unwrap();
        assert_eq!(r.session_id.as_deref(), Some("s"));
        assert_eq!(r.chat.message, "m");
        assert!(r.chat.context.is_some());
    }
    #[test]
    fn failed_and_streaming_replies_do_not_reach_the_model() {
        let m = |role, status| ChatMessage {
            role,
            status,
            ..Default::default()
        };
        assert!(m(Role::User, MessageStatus::Complete).reaches_model());
        assert!(m(Role::Assistant, MessageStatus::Complete).reaches_model());
        assert!(!m(Role::Assistant, MessageStatus::Failed).reaches_model());
        assert!(!m(Role::Assistant, MessageStatus::Streaming).reaches_model());
        // A stopped reply goes with the text that had streamed, and not when nothing had.
        let stopped = |content: &str| ChatMessage {
            content: content.into(),
            ..m(Role::Assistant, MessageStatus::Stopped)
        };
        assert!(stopped("Half an ans").reaches_model());
        assert!(!stopped(" ").reaches_model());
    }

    #[test]
    fn titles_are_one_line_of_at_most_80_characters() {
        assert_eq!(
            session_title("  How do I\n\n sort   a list? "),
            "How do I sort a list?"
        );
        assert_eq!(session_title(""), "");
        assert_eq!(session_title("a\0b\u{7}\nc"), "ab c");
        let long = "é".repeat(200);
        let t = session_title(&long);
        assert_eq!(t.chars().count(), MAX_TITLE_CHARS);
        assert!(t.ends_with('…'));
        let exact = "x".repeat(MAX_TITLE_CHARS);
        assert_eq!(session_title(&exact), exact, "no cut, no ellipsis");
    }

    #[test]
    fn a_session_list_reads_back_what_it_writes_and_refuses_what_is_not_one() {
        let list = SessionList {
            sessions: vec![
                SessionSummary {
                    session_id: "s1".into(),
                    title: "Plans".into(),
                    updated_at: 1_800_000_000_000,
                    agent: Some("helper".into()),
                },
                SessionSummary {
                    session_id: "s2".into(),
                    title: String::new(),
                    updated_at: 7,
                    agent: None,
                },
            ],
        };
        let back: SessionList =
            serde_json::from_value(serde_json::to_value(&list).unwrap()).unwrap();
        assert_eq!(back, list);
        for bad in [
            json!({}),
            json!({"sessions": [{"sessionId": "s", "title": "t"}]}),
            json!({"sessions": [{"sessionId": 5, "title": "t", "updatedAt": 1}]}),
            json!({"sessions": [{"sessionId": "s", "title": "t", "updatedAt": 1, "agent": 3}]}),
        ] {
            assert!(
                serde_json::from_value::<SessionList>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_greeting_is_checked_for_operators_bounded_for_hosts_and_layered() {
        let long = "x".repeat(Greeting::MAX_LINE_CHARS + 1);
        let ok = Greeting {
            placeholder: Some("Ask about your order…".into()),
            welcome: Some("Hi! I answer questions about orders.".into()),
            starters: vec!["Where is my order?".into(), "Return an item".into()],
        };
        assert_eq!(ok.check(), Ok(()));
        let too_many = Greeting {
            starters: vec!["a".into(); 5],
            ..Greeting::default()
        };
        assert!(too_many.check().unwrap_err().contains("at most 4"));
        let blank = Greeting {
            starters: vec![" ".into()],
            ..Greeting::default()
        };
        assert!(blank.check().is_err());
        let twice = Greeting {
            starters: vec!["a".into(), "a".into()],
            ..Greeting::default()
        };
        assert_eq!(twice.check(), Err("starters: each once".to_owned()));
        let placeholder = Greeting {
            placeholder: Some(long.clone()),
            ..Greeting::default()
        };
        assert!(placeholder.check().unwrap_err().starts_with("placeholder"));
        // A host's is cut to the limits rather than refused.
        let host = Greeting {
            placeholder: Some(long),
            welcome: None,
            starters: vec![
                "one".into(),
                " ".into(),
                "two".into(),
                "one".into(),
                "three".into(),
                "four".into(),
                "five".into(),
            ],
        }
        .bounded();
        assert_eq!(
            host.placeholder.as_deref().map(|p| p.chars().count()),
            Some(Greeting::MAX_LINE_CHARS)
        );
        assert_eq!(host.starters, ["one", "two", "three", "four"]);
        // The host's parts win; the agent's fill the rest.
        let layered = host.or(&ok);
        assert_eq!(layered.welcome, ok.welcome);
        assert_eq!(layered.starters, host.starters);
        assert_eq!(Greeting::default().or(&ok), ok);
    }

    #[test]
    fn a_user_claim_never_logs_its_hash() {
        let claim: UserClaim =
            serde_json::from_value(json!({"id": "u-1", "hash": "abc123"})).unwrap();
        assert!(!format!("{claim:?}").contains("abc123"));
        let missing: UserClaim = serde_json::from_value(json!({"id": "u-1"})).unwrap();
        assert_eq!(
            missing.hash, "",
            "a missing hash reads as a wrong one, not a bad frame"
        );
        assert!(
            serde_json::from_value::<UserClaim>(json!({"id": "u", "hash": "h", "x": 1})).is_err()
        );
    }

    #[test]
    fn a_message_with_attachments_flattens_to_words_then_data() {
        let m = ChatMessage {
            content: "see file".into(),
            attachments: vec![Attachment {
                name: "report.pdf".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let segment = attachments_segment(&m.attachments);
        assert_eq!(m.flat_text(), format!("see file\n\n{segment}"));
        let plain = ChatMessage {
            content: "hi".into(),
            ..Default::default()
        };
        assert_eq!(plain.flat_text(), "hi");
    }

    #[test]
    fn a_receipt_travels_as_json_and_reads_back_typed() {
        use crate::context::receipt::{Part, PartKind, Reason};
        let receipt = crate::context::Receipt {
            totals: crate::context::ContextReport {
                counted_input_tokens: 120,
                breakdown: crate::context::TokenBreakdown {
                    system_prompt: 20,
                    conversation: 100,
                    ..Default::default()
                },
                encoding: "o200k_base".into(),
                exact: true,
                compression: None,
            },
            parts: vec![Part {
                kind: PartKind::UserMessage {
                    id: Some("u1".into()),
                },
                reason: Reason::Always,
                tokens: 100,
            }],
            left_out: vec![],
            context_limit: 8000,
            output_reserve: 1000,
            overflow: None,
            filter: None,
            item_search: None,
        };
        let reply = ChatMessage {
            id: "a1".into(),
            role: Role::Assistant,
            receipt: Some(ReceiptJson::new(&receipt)),
            ..Default::default()
        };
        // As the browser reads a frame (from text) and as tests do (from a value).
        let text = serde_json::to_string(&reply).unwrap();
        let from_text: ChatMessage = serde_json::from_str(&text).unwrap();
        let from_value: ChatMessage = serde_json::from_value(json!(reply)).unwrap();
        assert_eq!(from_text, reply);
        assert_eq!(from_value, reply);
        let json = from_text.receipt.unwrap();
        assert_eq!(json.read().unwrap(), receipt);
        assert_eq!(json.totals(), Some(receipt.totals.clone()));

        // A reply stored before receipts carried only the totals, under their old name.
        let old: ChatMessage = serde_json::from_value(json!({"id": "a0", "role": "assistant",
            "content": "", "status": "complete", "createdAt": 0,
            "contextReport": json!(receipt.totals)}))
        .unwrap();
        let old = old.receipt.unwrap();
        assert!(old.read().unwrap().parts.is_empty());
        assert_eq!(old.totals(), Some(receipt.totals));

        // JSON that is not a receipt is an error to read, and has no totals.
        let odd: ChatMessage = serde_json::from_value(json!({"id": "a2", "role": "assistant",
            "content": "", "status": "complete", "createdAt": 0, "receipt": {"parts": 3}}))
        .unwrap();
        let odd = odd.receipt.unwrap();
        assert!(odd.read().is_err());
        assert_eq!(odd.totals(), None);
    }
}
