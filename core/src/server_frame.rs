//! Reads a [`ServerFrame`] (`{"syncId", "type", "data"}`) without serde's buffering of flattened
//! and tagged content: with the derived reader every event's payload type was read twice over,
//! once straight from the text and once from a buffered copy, and the browser's download carried
//! both (about a fifth of the chat's serde code). Here `data` is read straight into the payload
//! its `type` names; a `data` that comes first (a reordered object) is held as a JSON value,
//! written back to text and read by the same path.

use serde::Deserialize;
use serde::de::{self, DeserializeSeed as _, Deserializer, IgnoredAny, MapAccess, Visitor};
use strum::VariantNames as _;

use crate::wire::{ServerEvent, ServerFrame};

impl<'de> Deserialize<'de> for ServerFrame {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FrameVisitor)
    }
}

struct FrameVisitor;

impl<'de> Visitor<'de> for FrameVisitor {
    type Value = ServerFrame;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a server frame {syncId, type, data}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ServerFrame, A::Error> {
        let mut sync_id: Option<u64> = None;
        let mut kind: Option<String> = None;
        let mut event: Option<ServerEvent> = None;
        // `data` read before `type`.
        let mut early: Option<serde_json::Value> = None;
        while let Some(key) = map.next_key::<FrameKey>()? {
            match key {
                FrameKey::SyncId => {
                    if sync_id.replace(map.next_value()?).is_some() {
                        return Err(de::Error::duplicate_field("syncId"));
                    }
                }
                FrameKey::Type => {
                    if kind.replace(map.next_value()?).is_some() {
                        return Err(de::Error::duplicate_field("type"));
                    }
                }
                FrameKey::Data => {
                    if event.is_some() || early.is_some() {
                        return Err(de::Error::duplicate_field("data"));
                    }
                    match &kind {
                        Some(kind) => event = Some(map.next_value_seed(EventSeed(kind))?),
                        None => early = Some(map.next_value()?),
                    }
                }
                FrameKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let sync_id = sync_id.ok_or_else(|| de::Error::missing_field("syncId"))?;
        let kind = kind.ok_or_else(|| de::Error::missing_field("type"))?;
        let event = match (event, early) {
            (Some(event), _) => event,
            (None, Some(data)) => {
                let text = serde_json::to_string(&data).map_err(de::Error::custom)?;
                let mut reader = serde_json::Deserializer::from_str(&text);
                EventSeed(&kind)
                    .deserialize(&mut reader)
                    .map_err(de::Error::custom)?
            }
            (None, None) => return Err(de::Error::missing_field("data")),
        };
        Ok(ServerFrame { sync_id, event })
    }
}

/// The frame's keys.
enum FrameKey {
    SyncId,
    Type,
    Data,
    Other,
}

impl<'de> Deserialize<'de> for FrameKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = FrameKey;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a frame key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<FrameKey, E> {
                Ok(match key {
                    "syncId" => FrameKey::SyncId,
                    "type" => FrameKey::Type,
                    "data" => FrameKey::Data,
                    _ => FrameKey::Other,
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

/// Reads the payload of the event named `type` (`ServerEvent`'s variant names, snake_case).
struct EventSeed<'a>(&'a str);

impl<'de> de::DeserializeSeed<'de> for EventSeed<'_> {
    type Value = ServerEvent;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<ServerEvent, D::Error> {
        use ServerEvent as E;
        Ok(match self.0 {
            "session" => E::Session(Deserialize::deserialize(d)?),
            "snapshot" => E::Snapshot(Deserialize::deserialize(d)?),
            "accepted" => E::Accepted(Deserialize::deserialize(d)?),
            "reply_start" => E::ReplyStart(Deserialize::deserialize(d)?),
            "delta" => E::Delta(Deserialize::deserialize(d)?),
            "done" => E::Done(Deserialize::deserialize(d)?),
            "error" => E::Error(Deserialize::deserialize(d)?),
            "context_info" => E::ContextInfo(Deserialize::deserialize(d)?),
            "context" => E::Context(Deserialize::deserialize(d)?),
            "tool" => E::Tool(Deserialize::deserialize(d)?),
            "budget" => E::Budget(Deserialize::deserialize(d)?),
            "topics" => E::Topics(Deserialize::deserialize(d)?),
            "filter" => E::Filter(Deserialize::deserialize(d)?),
            "mark" => E::Mark(Deserialize::deserialize(d)?),
            "items" => E::Items(Deserialize::deserialize(d)?),
            "preview" => E::Preview(Deserialize::deserialize(d)?),
            "approval_request" => E::ApprovalRequest(Deserialize::deserialize(d)?),
            "approval" => E::Approval(Deserialize::deserialize(d)?),
            "heartbeat" => E::Heartbeat(Deserialize::deserialize(d)?),
            "sessions" => E::Sessions(Deserialize::deserialize(d)?),
            other => return Err(de::Error::unknown_variant(other, ServerEvent::VARIANTS)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Delta;
    use serde::Serialize as _;
    use serde_json::json;

    fn delta() -> ServerFrame {
        ServerFrame {
            sync_id: 7,
            event: ServerEvent::Delta(Delta {
                message_id: "m".into(),
                text: "he".into(),
            }),
        }
    }

    /// Every event type is read: a missing arm fails here, not in a browser.
    #[test]
    fn every_event_type_has_a_reader() {
        for name in ServerEvent::VARIANTS {
            let error = EventSeed(name)
                .deserialize(serde_json::Value::Null)
                .expect_err("null is no payload");
            assert!(
                !error.to_string().contains("unknown variant"),
                "{name}: {error}"
            );
        }
    }

    #[test]
    fn type_first_data_first_and_extra_keys_read_alike() {
        let frame = delta();
        let text = frame
            .serialize(serde_json::value::Serializer)
            .unwrap()
            .to_string();
        assert_eq!(
            text, r#"{"data":{"messageId":"m","text":"he"},"syncId":7,"type":"delta"}"#,
            "a JSON value's keys are sorted: data comes first"
        );
        for text in [
            r#"{"syncId":7,"type":"delta","data":{"messageId":"m","text":"he"}}"#,
            r#"{"data":{"text":"he","messageId":"m"},"type":"delta","syncId":7}"#,
            r#"{"extra":[1,{"a":2}],"syncId":7,"data":{"messageId":"m","text":"he"},"type":"delta"}"#,
        ] {
            assert_eq!(
                serde_json::from_str::<ServerFrame>(text).unwrap(),
                frame,
                "{text}"
            );
        }
        assert_eq!(
            serde_json::from_value::<ServerFrame>(
                json!({"syncId": 7, "type": "delta", "data": {"messageId": "m", "text": "he"}})
            )
            .unwrap(),
            frame
        );
    }

    #[test]
    fn bad_frames_are_refused_with_what_is_wrong() {
        let error = |text: &str| {
            serde_json::from_str::<ServerFrame>(text)
                .unwrap_err()
                .to_string()
        };
        assert!(
            error(r#"{"syncId":1,"type":"nope","data":{}}"#).contains("unknown variant `nope`")
        );
        assert!(error(r#"{"syncId":1,"type":"delta"}"#).contains("missing field `data`"));
        assert!(
            error(r#"{"type":"delta","data":{"messageId":"m","text":""}}"#)
                .contains("missing field `syncId`")
        );
        assert!(error(r#"{"syncId":1,"data":{}}"#).contains("missing field `type`"));
        assert!(
            error(r#"{"syncId":1,"type":"delta","data":{"messageId":"m"}}"#)
                .contains("missing field `text`")
        );
        assert!(
            error(r#"{"syncId":1,"type":"delta","type":"done","data":{}}"#)
                .contains("duplicate field `type`")
        );
        assert!(error(r#"[1,"delta",{}]"#).contains("invalid type"));
    }
}
