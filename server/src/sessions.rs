//! Session creation and access: unguessable ids, a token issued once, only its hash stored; a
//! verified user's sessions are also reachable by that user, without the token.

use std::net::IpAddr;
use std::sync::Arc;

use glassbox_core::wire::{
    PROTOCOL_VERSION, SessionInfo, SessionSummary, UserClaim, session_title,
};
use rand::RngCore;
use sha2::{Digest, Sha256};

use glassbox_core::context::SessionSettings;

use crate::agents::Agent;
use crate::config::Config;
use crate::embed::service::EmbeddingService;
use crate::hub::{Hub, Hubs};
use crate::identity::{Identity, IdentityError, VerifiedUser};
use crate::ids::{new_id, now_ms};
use crate::rate_limits::{Caller, RateLimited, RateLimits};
use crate::storage::{NewSession, StorageError, Store};
use crate::tools::{ToolRegistry, ToolScope};
use crate::wire_error::ToWire;

/// Why a session could not be opened or deleted.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("missing or wrong session token")]
    Unauthorized,
    #[error("model {0:?} is not allowed on this server")]
    ModelNotAllowed(String),
    #[error("agent {name:?} is not configured on this server (configured: {})", known.join(", "))]
    UnknownAgent { name: String, known: Vec<String> },
    #[error("no such session among this user's")]
    NotListed,
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    #[error("storage failed")]
    Storage(#[from] StorageError),
}

impl ToWire for SessionError {
    fn code(&self) -> glassbox_core::ErrorCode {
        use glassbox_core::ErrorCode;
        match self {
            SessionError::Unauthorized => ErrorCode::Unauthorized,
            SessionError::ModelNotAllowed(_) => ErrorCode::ModelNotAllowed,
            SessionError::UnknownAgent { .. } => ErrorCode::UnknownAgent,
            SessionError::NotListed => ErrorCode::NotFound,
            SessionError::Identity(e) => e.code(),
            SessionError::RateLimited(e) => e.code(),
            SessionError::Storage(e) => e.code(),
        }
    }

    fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            SessionError::RateLimited(e) => e.retry_after(),
            _ => None,
        }
    }
}

/// Opens, deletes and purges sessions.
#[derive(Clone)]
pub struct Sessions {
    config: Arc<Config>,
    store: Store,
    hubs: Arc<Hubs>,
    limits: Arc<RateLimits>,
    embeddings: Arc<EmbeddingService>,
    tools: ToolRegistry,
    items: crate::items::Items,
    identity: Identity,
}

/// What a client asks for when it opens a session.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ask<'a> {
    /// An existing session (with its `token`); a new one when `None`.
    pub id: Option<&'a str>,
    pub token: Option<&'a str>,
    /// The model to reply with; the agent's or the server's when `None`.
    pub model: Option<&'a str>,
    /// A new session's agent; the first configured when `None`.
    pub agent: Option<&'a str>,
    /// Where the request comes from (the new-session limit of an anonymous client).
    pub address: Option<IpAddr>,
    /// The user the host vouches for: a new session is theirs, and theirs open without a token.
    pub user: Option<&'a UserClaim>,
}

/// A session opened by a client.
pub struct OpenSession {
    pub hub: Arc<Hub>,
    pub info: SessionInfo,
    /// The verified user of the request (whoever owns the session).
    pub user: Option<VerifiedUser>,
    /// A new session opened for a message ([`Sessions::open_for_message`]), not stored yet: the
    /// message's turn stores it.
    pub unsaved: Option<UnsavedSession>,
}

/// A new session not stored yet.
#[derive(Clone)]
pub struct UnsavedSession {
    id: String,
    token_hash: String,
    created_at: i64,
    settings: SessionSettings,
    user_id: Option<String>,
}

impl UnsavedSession {
    /// The session as the store takes it.
    pub fn as_new(&self) -> NewSession<'_> {
        NewSession {
            id: &self.id,
            token_hash: &self.token_hash,
            created_at: self.created_at,
            settings: &self.settings,
            user_id: self.user_id.as_deref(),
        }
    }
}

/// What opening a session is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opening {
    /// Stored and touched now.
    Open,
    /// A WebSocket hello: as `Open`, within the session's joins per minute.
    Join,
    /// One message: a new session is stored with it, an existing one touched by its turn.
    ForMessage,
}

fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Compares without an early exit, so timing says nothing about where the inputs differ.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Sessions {
    /// Sessions stored in `store`, live in `hubs`.
    pub fn new(
        config: Arc<Config>,
        store: Store,
        hubs: Arc<Hubs>,
        limits: Arc<RateLimits>,
        embeddings: Arc<EmbeddingService>,
        tools: ToolRegistry,
        items: crate::items::Items,
    ) -> Self {
        Self {
            identity: Identity::new(config.identity_secret.as_ref().map(|s| s.bytes())),
            config,
            store,
            hubs,
            limits,
            embeddings,
            tools,
            items,
        }
    }

    /// Opens an existing session by its id and token, or the verified user who owns it (a REST
    /// route's `{id}`, bearer token and user headers); unknown ids, wrong tokens and another
    /// user's sessions are all [`SessionError::Unauthorized`].
    pub async fn existing(
        &self,
        id: &str,
        token: Option<&str>,
        user: Option<&UserClaim>,
    ) -> Result<OpenSession, SessionError> {
        let ask = Ask {
            id: Some(id),
            token,
            user,
            ..Ask::default()
        };
        self.open_or_join(ask, Opening::Open).await
    }

    /// The user of `claim`, checked against the server's secret.
    pub fn verify(&self, claim: &UserClaim) -> Result<VerifiedUser, IdentityError> {
        self.identity.verify(claim)
    }

    /// `user`'s sessions, newest first (those with a message or a title).
    pub async fn list(&self, user: &VerifiedUser) -> Result<Vec<SessionSummary>, SessionError> {
        Ok(self.store.user_sessions(user.id()).await?)
    }

    /// Renames session `id`, which the caller may reach (its own, or `user`'s): a blank or absent
    /// title returns it to its first message. Returns the title as stored.
    pub async fn rename(
        &self,
        id: &str,
        title: Option<&str>,
    ) -> Result<Option<String>, SessionError> {
        let title = title.map(session_title).filter(|t| !t.is_empty());
        if self.store.rename_session(id, title.as_deref()).await? {
            Ok(title)
        } else {
            Err(SessionError::Unauthorized)
        }
    }

    /// The session a command of a connection in `current` names: `current` itself when `target`
    /// is absent or the same, else `target` when it belongs to the connection's `user` (another
    /// user's, an anonymous one and an unknown id are all [`SessionError::NotListed`]: the
    /// connection's own session is fine, so no `unauthorized` that would end it).
    pub async fn reachable(
        &self,
        current: &str,
        target: Option<&str>,
        user: Option<&VerifiedUser>,
    ) -> Result<String, SessionError> {
        let Some(target) = target.filter(|t| *t != current) else {
            return Ok(current.to_owned());
        };
        let user = user.ok_or(SessionError::NotListed)?;
        let row = self
            .store
            .session(target)
            .await?
            .ok_or(SessionError::NotListed)?;
        match row.user_id {
            Some(owner) if same_bytes(owner.as_bytes(), user.id().as_bytes()) => {
                Ok(target.to_owned())
            }
            _ => Err(SessionError::NotListed),
        }
    }

    /// Opens a session: a new one when `ask.id` is `None` (within the sessions-per-hour limit of
    /// its address, for its agent), else an existing one whose token must match.
    pub async fn open(&self, ask: Ask<'_>) -> Result<OpenSession, SessionError> {
        self.open_or_join(ask, Opening::Open).await
    }

    /// Opens a session for one message (`POST /api/chat`): as [`Self::open`], but a new session
    /// is left for the message's turn to store with it ([`OpenSession::unsaved`], so a refused
    /// message leaves no session behind), and an existing one is touched by that turn.
    pub async fn open_for_message(&self, ask: Ask<'_>) -> Result<OpenSession, SessionError> {
        self.open_or_join(ask, Opening::ForMessage).await
    }

    /// Opens a session for a WebSocket hello: as [`Self::open`], and joining an existing
    /// one (which reads its history and, under a filter, scores it) counts against the session's
    /// joins per minute once its token is checked, before anything is read or touched.
    pub async fn join(&self, ask: Ask<'_>) -> Result<OpenSession, SessionError> {
        self.open_or_join(ask, Opening::Join).await
    }

    /// The agent of a new session asked to be for `name` (the first one when `None`); `None` on
    /// a server without agents.
    fn agent_for_new(&self, name: Option<&str>) -> Result<Option<Arc<Agent>>, SessionError> {
        let agents = self.items.agents();
        match (agents.pick(name), name) {
            (Some(agent), _) => Ok(Some(agent.clone())),
            (None, None) => Ok(None),
            (None, Some(name)) => Err(SessionError::UnknownAgent {
                name: name.chars().take(64).collect(),
                known: agents.all().iter().map(|a| a.name.clone()).collect(),
            }),
        }
    }

    /// The model of a session of `agent`: the one the client asks for (allowed by the server or
    /// the agent's own), else the agent's, else the server's.
    fn model_for(
        &self,
        asked: Option<&str>,
        agent: Option<&Agent>,
    ) -> Result<String, SessionError> {
        let agents_model = agent.and_then(|a| a.model.as_deref());
        match asked {
            Some(m) if self.config.model_allowed(m) || Some(m) == agents_model => Ok(m.to_owned()),
            Some(m) => Err(SessionError::ModelNotAllowed(m.to_owned())),
            None => Ok(agents_model.unwrap_or(&self.config.model).to_owned()),
        }
    }

    async fn open_or_join(
        &self,
        ask: Ask<'_>,
        opening: Opening,
    ) -> Result<OpenSession, SessionError> {
        let grace = self.config.disconnect_grace;
        // A claimed user is checked first: a wrong hash opens nothing, whatever else is asked.
        let user = self.identity.verify_opt(ask.user)?;
        match ask.id {
            None => {
                let agent = self.agent_for_new(ask.agent)?;
                let model = self.model_for(ask.model, agent.as_deref())?;
                self.limits
                    .create_session(Caller::of(user.as_ref(), ask.address).as_ref())
                    .await?;
                let id = new_id();
                let mut raw = [0u8; 32];
                rand::rng().fill_bytes(&mut raw);
                let token = hex::encode(raw);
                // A new session starts with its agent's `always` items.
                let settings = SessionSettings {
                    agent: agent.as_ref().map(|a| a.name.clone()),
                    items: agent
                        .as_deref()
                        .map(|a| self.items.for_new_session(a))
                        .unwrap_or_default(),
                    ..SessionSettings::default()
                };
                let owner = user.as_ref().map(VerifiedUser::id);
                let greeting = agent
                    .as_ref()
                    .map(|a| a.greeting.clone())
                    .unwrap_or_default();
                let unsaved = UnsavedSession {
                    id: id.clone(),
                    token_hash: hash_token(&token),
                    created_at: now_ms(),
                    settings: settings.clone(),
                    user_id: owner.map(str::to_owned),
                };
                let unsaved = if opening == Opening::ForMessage {
                    Some(unsaved)
                } else {
                    self.store.create_session(&unsaved.as_new()).await?;
                    None
                };
                let hub = self.hubs.get_or_create(&id, grace, false);
                tracing::info!(session = %id, agent = ?settings.agent, verified_user = owner.is_some(), stored_with_first_message = unsaved.is_some(), "session created");
                Ok(OpenSession {
                    unsaved,
                    hub,
                    info: SessionInfo {
                        protocol: PROTOCOL_VERSION,
                        session_id: id,
                        token: Some(token),
                        model,
                        agent: settings.agent,
                        user: owner.map(str::to_owned),
                        placeholder: greeting.placeholder,
                        welcome: greeting.welcome,
                        starters: greeting.starters,
                        context: None,
                        budget: None,
                        heartbeat_ms: None,
                    },
                    user,
                })
            }
            Some(id) => {
                // Unknown ids, wrong tokens and another user's sessions look the same to the caller.
                let row = self
                    .store
                    .session(id)
                    .await?
                    .ok_or(SessionError::Unauthorized)?;
                let by_token = ask.token.is_some_and(|token| {
                    same_bytes(row.token_hash.as_bytes(), hash_token(token).as_bytes())
                });
                let by_owner = match (&user, &row.user_id) {
                    (Some(user), Some(owner)) => same_bytes(owner.as_bytes(), user.id().as_bytes()),
                    _ => false,
                };
                if !(by_token || by_owner) {
                    return Err(SessionError::Unauthorized);
                }
                if opening == Opening::Join {
                    self.limits.join(id).await?;
                }
                // The session keeps the agent it was created for (one the configuration no
                // longer has: none).
                let agents = self.items.agents();
                let (agent_name, agent) = if agents.is_empty() {
                    (None, None)
                } else {
                    let name = self.store.settings(id).await?.agent;
                    let agent = name.as_deref().and_then(|n| agents.pick(Some(n))).cloned();
                    (name, agent)
                };
                let model = self.model_for(ask.model, agent.as_deref())?;
                let greeting = agent
                    .as_ref()
                    .map(|a| a.greeting.clone())
                    .unwrap_or_default();
                if opening != Opening::ForMessage {
                    self.store.touch_session(id, now_ms()).await?;
                }
                let hub = self.hubs.get_or_create(id, grace, true);
                Ok(OpenSession {
                    unsaved: None,
                    hub,
                    info: SessionInfo {
                        protocol: PROTOCOL_VERSION,
                        session_id: id.to_owned(),
                        token: None,
                        model,
                        agent: agent_name,
                        user: user.as_ref().map(|u| u.id().to_owned()),
                        placeholder: greeting.placeholder,
                        welcome: greeting.welcome,
                        starters: greeting.starters,
                        context: None,
                        budget: None,
                        heartbeat_ms: None,
                    },
                    user,
                })
            }
        }
    }

    /// Deletes a session now (its token is checked by the caller): messages, summaries and cached
    /// embeddings go with it, and every open tab is told it is gone.
    pub async fn delete(&self, id: &str) -> Result<(), SessionError> {
        // A step of vector computing under way finishes first (its vectors are then deleted too).
        let gate = crate::topics::session_gate(id);
        let _no_vectors_meanwhile = gate.lock().await;
        let Some(keys) = self.store.delete_session(id).await? else {
            return Err(SessionError::Unauthorized);
        };
        self.embeddings.forget(&keys);
        self.tools.clear(&ToolScope::Session(id.to_owned()));
        self.hubs.remove(id);
        tracing::info!(session = id, "session deleted");
        Ok(())
    }

    /// Deletes sessions unused for longer than `GLASSBOX_SESSION_TTL`; returns how many. A batch at
    /// a time, each holding its sessions' vector gates as [`Sessions::delete`] does, so no
    /// step of vectors under way is stored for a session once it is gone.
    pub async fn purge_idle(&self) -> Result<u64, SessionError> {
        const BATCH: i64 = 200;
        let Some(ttl) = self.config.session_ttl else {
            return Ok(0);
        };
        let before = now_ms() - i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let mut count = 0;
        loop {
            // A session with a connected tab or a reply running is in use, whatever its timestamp.
            let ids = self
                .store
                .idle_sessions(before, &self.hubs.live_ids(), BATCH)
                .await?;
            if ids.is_empty() {
                break;
            }
            let gates: Vec<_> = ids
                .iter()
                .map(|id| crate::topics::session_gate(id))
                .collect();
            let mut held = Vec::with_capacity(gates.len());
            for gate in &gates {
                held.push(gate.lock().await);
            }
            let (purged, keys) = self.store.delete_idle_sessions(&ids, before).await?;
            drop(held);
            self.embeddings.forget(&keys);
            for id in &purged {
                self.tools.clear(&ToolScope::Session(id.clone()));
                self.hubs.remove(id);
            }
            count += purged.len();
            if purged.is_empty() {
                // All of them were used meanwhile; the next purge looks again.
                break;
            }
        }
        if count > 0 {
            tracing::info!(sessions = count, "purged sessions idle longer than the TTL");
        }
        Ok(count as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comparison_needs_equal_bytes() {
        assert!(same_bytes(b"abc", b"abc"));
        assert!(!same_bytes(b"abc", b"abd"));
        assert!(!same_bytes(b"abc", b"ab"));
    }

    #[test]
    fn ids_are_32_hex_chars_and_differ() {
        let (a, b) = (new_id(), new_id());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
