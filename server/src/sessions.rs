//! Session creation and access: unguessable ids, a token issued once, only its hash stored.

use std::net::IpAddr;
use std::sync::Arc;

use glassbox_core::wire::SessionInfo;
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::embed::service::EmbeddingService;
use crate::hub::{Hub, Hubs};
use crate::ids::{new_id, now_ms};
use crate::rate_limits::{RateLimited, RateLimits};
use crate::storage::{StorageError, Store};
use crate::tools::{ToolRegistry, ToolScope};
use crate::wire_error::ToWire;

/// Why a session could not be opened or deleted.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("missing or wrong session token")]
    Unauthorized,
    #[error("model {0:?} is not allowed on this server")]
    ModelNotAllowed(String),
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
}

/// A session opened by a client.
pub struct OpenSession {
    pub hub: Arc<Hub>,
    pub info: SessionInfo,
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
    ) -> Self {
        Self {
            config,
            store,
            hubs,
            limits,
            embeddings,
            tools,
        }
    }

    /// Opens an existing session by its id and token (a REST route's `{id}` and bearer token);
    /// unknown ids and wrong tokens are both [`SessionError::Unauthorized`].
    pub async fn existing(
        &self,
        id: &str,
        token: Option<&str>,
    ) -> Result<OpenSession, SessionError> {
        self.open(Some(id), token, None, None).await
    }

    /// Opens a session: a new one when `id` is `None` (within the sessions-per-hour limit of
    /// `address`), else an existing one whose token must match. `model` is the model the client
    /// asks for, if any.
    pub async fn open(
        &self,
        id: Option<&str>,
        token: Option<&str>,
        model: Option<&str>,
        address: Option<IpAddr>,
    ) -> Result<OpenSession, SessionError> {
        self.open_or_join(id, token, model, address, false).await
    }

    /// Opens a session for a WebSocket hello: as [`Self::open`], and joining an existing
    /// one (which reads its history and, under a filter, scores it) counts against the session's
    /// joins per minute once its token is checked, before anything is read or touched.
    pub async fn join(
        &self,
        id: Option<&str>,
        token: Option<&str>,
        model: Option<&str>,
        address: Option<IpAddr>,
    ) -> Result<OpenSession, SessionError> {
        self.open_or_join(id, token, model, address, true).await
    }

    async fn open_or_join(
        &self,
        id: Option<&str>,
        token: Option<&str>,
        model: Option<&str>,
        address: Option<IpAddr>,
        join: bool,
    ) -> Result<OpenSession, SessionError> {
        let model = match model {
            Some(m) if !self.config.model_allowed(m) => {
                return Err(SessionError::ModelNotAllowed(m.to_owned()));
            }
            Some(m) => m.to_owned(),
            None => self.config.model.clone(),
        };
        let grace = self.config.disconnect_grace;
        match id {
            None => {
                self.limits.create_session(address)?;
                let id = new_id();
                let mut raw = [0u8; 32];
                rand::rng().fill_bytes(&mut raw);
                let token = hex::encode(raw);
                self.store
                    .create_session(&id, &hash_token(&token), now_ms())
                    .await?;
                let hub = self.hubs.get_or_create(&id, grace, false);
                tracing::info!(session = %id, "session created");
                Ok(OpenSession {
                    hub,
                    info: SessionInfo {
                        session_id: id,
                        token: Some(token),
                        model,
                        context: None,
                        budget: None,
                    },
                })
            }
            Some(id) => {
                let token = token.ok_or(SessionError::Unauthorized)?;
                // Unknown ids and wrong tokens look the same to the caller.
                let row = self
                    .store
                    .session(id)
                    .await?
                    .ok_or(SessionError::Unauthorized)?;
                if !same_bytes(row.token_hash.as_bytes(), hash_token(token).as_bytes()) {
                    return Err(SessionError::Unauthorized);
                }
                if join {
                    self.limits.join(id)?;
                }
                self.store.touch_session(id, now_ms()).await?;
                let hub = self.hubs.get_or_create(id, grace, true);
                Ok(OpenSession {
                    hub,
                    info: SessionInfo {
                        session_id: id.to_owned(),
                        token: None,
                        model,
                        context: None,
                        budget: None,
                    },
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
