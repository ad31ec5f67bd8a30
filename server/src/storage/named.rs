//! Core's enums in the database: each is stored under its wire name (serde's), so its names are
//! written once, on the enum. The one place the store turns them into text and back.

use serde::Serialize;
use serde::de::{DeserializeOwned, IntoDeserializer};

/// A stored name that no variant of the enum has.
#[derive(Debug, thiserror::Error)]
#[error("{name:?} is not a {kind}")]
pub struct UnknownName {
    name: String,
    kind: &'static str,
}

/// An enum read from its stored name, as a row's field (`Option<Named<T>>` for a nullable
/// column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Named<T>(pub T);

super::column::decoded_via!(String => Named<T>, T: DeserializeOwned);

impl<T: DeserializeOwned> TryFrom<String> for Named<T> {
    type Error = UnknownName;

    fn try_from(name: String) -> Result<Self, UnknownName> {
        parse(&name).map(Named)
    }
}

/// The name `value` is stored under (a unit variant's serde name).
pub fn name<T: Serialize>(value: T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        // Not a unit variant: never one of the stored enums.
        other => other.map(|v| v.to_string()).unwrap_or_default(),
    }
}

/// The variant stored as `name`.
pub fn parse<T: DeserializeOwned>(name: &str) -> Result<T, UnknownName> {
    T::deserialize(name.into_deserializer()).map_err(|_: serde::de::value::Error| UnknownName {
        name: name.chars().take(64).collect(),
        kind: std::any::type_name::<T>(),
    })
}

#[cfg(test)]
mod tests {
    use glassbox_core::attachments::FileKind;
    use glassbox_core::context::MessageMark;
    use glassbox_core::vocab::{MessageStatus, Role};

    use super::*;

    /// The names rows already hold: a rename on the enum would break stored data.
    fn round_trips<T>(pairs: &[(T, &str)])
    where
        T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug + Copy,
    {
        for (value, stored) in pairs {
            assert_eq!(name(*value), *stored);
            assert_eq!(parse::<T>(stored).ok(), Some(*value));
        }
    }

    #[test]
    fn stored_names_do_not_change() {
        round_trips(&[(Role::User, "user"), (Role::Assistant, "assistant")]);
        round_trips(&[
            (MessageStatus::Complete, "complete"),
            (MessageStatus::Streaming, "streaming"),
            (MessageStatus::Failed, "failed"),
            (MessageStatus::Stopped, "stopped"),
        ]);
        round_trips(&[(FileKind::Image, "image"), (FileKind::Text, "text")]);
        round_trips(&[
            (MessageMark::Pinned, "pinned"),
            (MessageMark::Excluded, "excluded"),
        ]);
    }

    #[test]
    fn unknown_names_are_errors() {
        let e = Named::<Role>::try_from("robot".to_owned()).unwrap_err();
        assert!(e.to_string().contains("\"robot\""), "{e}");
        assert!(Named::<MessageMark>::try_from("starred".to_owned()).is_err());
    }
}
