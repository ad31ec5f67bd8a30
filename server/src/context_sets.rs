//! The session's context sets (files, applet, endpoints …) changed by the model's tool, the host
//! and REST alike: each change is validated, stored in the session's settings and heard by every
//! tab of the session.

use glassbox_core::context::sets::{self, ContextSetError, SetContextArgs};
use glassbox_core::wire::{ContextEvent, ContextReason, ServerEvent};

use crate::hub::Hub;
use crate::storage::{StorageError, Store};
use crate::wire_error::ToWire;

/// Why a change of context sets was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ContextSetsError {
    #[error(transparent)]
    Invalid(#[from] ContextSetError),
    #[error("the context sets could not be stored")]
    Storage(#[from] StorageError),
}

impl ToWire for ContextSetsError {
    fn code(&self) -> glassbox_core::ErrorCode {
        match self {
            ContextSetsError::Invalid(_) => glassbox_core::ErrorCode::InvalidContextSet,
            ContextSetsError::Storage(e) => e.code(),
        }
    }
}

/// Changes one context set of the hub's session (the model's tool, the host, REST), stores it and
/// tells every tab. Unknown set names are allowed and logged (likely a typo).
pub async fn change(
    store: &Store,
    hub: &Hub,
    args: &SetContextArgs,
) -> Result<sets::ContextSets, ContextSetsError> {
    if !sets::is_known_set(&args.set_name) {
        tracing::warn!(session = %hub.session_id, set = %args.set_name, "unknown context set name (typo?)");
    }
    let (context, _) = store
        .update_settings(&hub.session_id, |s| -> Result<_, ContextSetsError> {
            s.context = sets::apply_set(&s.context, &args.set_name, &args.items, args.mode)?;
            Ok(s.context.clone())
        })
        .await?;
    hub.publish(ServerEvent::Context(ContextEvent {
        reason: ContextReason::Changed,
        context: context.clone(),
        set_name: Some(args.set_name.clone()),
    }));
    Ok(context)
}

/// Replaces all context sets of the hub's session (REST `context`), stores them, tells every tab.
pub async fn replace(
    store: &Store,
    hub: &Hub,
    context: sets::ContextSets,
) -> Result<sets::ContextSets, ContextSetsError> {
    sets::validate_sets(&context)?;
    for name in context.keys().filter(|n| !sets::is_known_set(n)) {
        tracing::warn!(session = %hub.session_id, set = %name, "unknown context set name (typo?)");
    }
    let (context, _) = store
        .update_settings(&hub.session_id, |s| -> Result<_, ContextSetsError> {
            s.context = context;
            Ok(s.context.clone())
        })
        .await?;
    hub.publish(ServerEvent::Context(ContextEvent {
        reason: ContextReason::Changed,
        context: context.clone(),
        set_name: None,
    }));
    Ok(context)
}
