//! The storage contract: what every backend of `Store` does, checked on each — SQLite in a temp
//! folder, and PostgreSQL in a fresh database of the private cluster `cargo xtask test` starts
//! (`GLASSBOX_TEST_POSTGRES_URL`). A new backend passes all of it.

mod support;

use std::sync::Arc;

use glassbox_core::ErrorCode;
use glassbox_core::attachments::FileKind;
use glassbox_core::context::{MessageMark, SessionSettings, SessionTopics};
use glassbox_core::vocab::{MessageStatus, Role, Usage};
use glassbox_core::wire::{ChatMessage, WireError};
use glassbox_server::storage::{
    Caps, DatabaseUrl, FileStored, Hold, NewFile, NewSession, NewUserMessage, PageEnd, Reached,
    ReplyOutcome, Spend, Store, Unread,
};

/// A backend with nothing in it, and what keeps it alive.
struct Fresh {
    store: Store,
    _dir: Option<tempfile::TempDir>,
}

async fn sqlite() -> Fresh {
    let dir = tempfile::tempdir().unwrap();
    let url = DatabaseUrl::resolve(None, dir.path()).unwrap();
    Fresh {
        store: Store::connect(&url).await.unwrap(),
        _dir: Some(dir),
    }
}

async fn postgres() -> Fresh {
    let url = support::postgres_database().await;
    Fresh {
        store: Store::connect(&DatabaseUrl::Postgres(url)).await.unwrap(),
        _dir: None,
    }
}

/// Each contract test, once per backend.
macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[tokio::test] async fn $name() { super::$name(super::sqlite().await.store).await })*
        }
        mod on_postgres {
            $(#[tokio::test] async fn $name() { super::$name(super::postgres().await.store).await })*
        }
    };
}

contract!(
    sessions_keep_their_token_user_settings_and_title,
    a_turn_stores_its_message_and_reply_once,
    replies_finish_restart_and_checkpoint,
    concurrent_turns_take_distinct_positions,
    a_new_session_is_stored_with_its_first_turn,
    spending_adds_up_per_session_day_and_user,
    reservations_hold_tokens_until_settled_or_expired,
    a_finished_reply_settles_its_last_call,
    embeddings_are_cached_and_go_with_their_session,
    idle_sessions_are_found_and_deleted_unless_kept,
    files_are_bounded_and_read_back,
    topics_keep_the_newest_generation,
    history_is_read_in_pages_with_memories_and_unread,
    summaries_and_marks_are_kept,
    interrupted_replies_fail_at_start,
);

fn user(id: &str, cid: Option<&'static str>, at: i64) -> NewUserMessage<'static> {
    NewUserMessage {
        id: Box::leak(id.to_owned().into_boxed_str()),
        content: "a question with ünïcode and 'quotes'",
        client_message_id: cid,
        context: None,
        attachments: &[],
        created_at: at,
    }
}

fn done(content: &str) -> ReplyOutcome<'_> {
    ReplyOutcome {
        content,
        status: MessageStatus::Complete,
        usage: Some(Usage {
            input_tokens: 12,
            output_tokens: 3,
            counted: false,
        }),
        receipt: None,
        tool_rounds: &[],
        error: None,
    }
}

fn spend(reservation: Option<&str>, day: i64, tokens: u64) -> Spend<'_> {
    Spend {
        reservation,
        day,
        tokens,
    }
}

async fn session(store: &Store, id: &str, user_id: Option<&str>) {
    store
        .create_session(&NewSession {
            id,
            token_hash: "hash",
            created_at: 1_000,
            settings: &SessionSettings::default(),
            user_id,
        })
        .await
        .unwrap();
}

async fn sessions_keep_their_token_user_settings_and_title(store: Store) {
    session(&store, "s1", Some("alice")).await;
    session(&store, "s2", None).await;
    let row = store.session("s1").await.unwrap().unwrap();
    assert_eq!(
        (row.token_hash.as_str(), row.user_id.as_deref()),
        ("hash", Some("alice"))
    );
    assert!(store.session("nope").await.unwrap().is_none());
    assert_eq!(
        store.settings("s2").await.unwrap(),
        SessionSettings::default()
    );
    let (value, stored) = store
        .update_settings("s1", |s| {
            s.agent = Some("docs".into());
            Ok::<_, glassbox_server::storage::StorageError>(7)
        })
        .await
        .unwrap();
    assert_eq!(value, 7);
    assert_eq!(store.settings("s1").await.unwrap(), stored);
    assert_eq!(stored.agent.as_deref(), Some("docs"));
    // A verified user's sessions: only those with a message or a title, newest first.
    assert!(store.user_sessions("alice").await.unwrap().is_empty());
    store
        .insert_turn("s1", &user("m1", None, 5_000), "r1", 5_000)
        .await
        .unwrap();
    assert!(store.rename_session("s1", Some("Plans")).await.unwrap());
    assert!(!store.rename_session("nope", Some("x")).await.unwrap());
    let listed = store.user_sessions("alice").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].title.as_str(), listed[0].agent.as_deref()),
        ("Plans", Some("docs"))
    );
    assert_eq!(listed[0].updated_at, 5_000);
    assert!(store.rename_session("s1", None).await.unwrap());
    let listed = store.user_sessions("alice").await.unwrap();
    assert!(listed[0].title.starts_with("a question"), "{listed:?}");
    // Deleted with everything in it.
    assert_eq!(store.delete_session("s1").await.unwrap(), Some(vec![]));
    assert_eq!(store.delete_session("s1").await.unwrap(), None);
    assert!(store.messages("s1").await.unwrap().is_empty());
}

async fn a_turn_stores_its_message_and_reply_once(store: Store) {
    session(&store, "s", None).await;
    let context = serde_json::json!({"page": "pricing", "n": 3})
        .as_object()
        .cloned()
        .unwrap();
    let attachments = [glassbox_core::vocab::Attachment {
        id: Some("f1".into()),
        name: "notes.md".into(),
        mime_type: Some("text/markdown".into()),
        size: Some(12),
        ..Default::default()
    }];
    let first = NewUserMessage {
        context: Some(&context),
        attachments: &attachments,
        ..user("u1", Some("c1"), 10)
    };
    let (message, reply) = store.insert_turn("s", &first, "a1", 10).await.unwrap();
    let reply = reply.unwrap();
    assert_eq!(message.role, Role::User);
    assert_eq!(message.context.as_ref(), Some(&context));
    assert_eq!(message.attachments, attachments);
    assert_eq!(message.client_message_id.as_deref(), Some("c1"));
    assert_eq!(
        (reply.role, reply.status, reply.reply_to.as_deref()),
        (Role::Assistant, MessageStatus::Streaming, Some("u1"))
    );
    // The same client message id: nothing stored, the first returned.
    let (again, none) = store
        .insert_turn("s", &user("u2", Some("c1"), 11), "a2", 11)
        .await
        .unwrap();
    assert_eq!((again.id.as_str(), none), ("u1", None));
    let (imported, dup) = store
        .insert_user_message("s", &user("u3", Some("c1"), 12))
        .await
        .unwrap();
    assert_eq!((imported.id.as_str(), dup), ("u1", true));
    let (imported, dup) = store
        .insert_user_message("s", &user("u4", None, 13))
        .await
        .unwrap();
    assert_eq!((imported.id.as_str(), dup), ("u4", false));
    let ids: Vec<String> = store
        .messages("s")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(ids, ["u1", "a1", "u4"]);
    assert_eq!(store.position("s", "u4").await.unwrap(), Some(3));
    // An approval message goes after every message so far.
    let approval = ChatMessage {
        id: "p1".into(),
        role: Role::Approval,
        reply_to: Some("a1".into()),
        created_at: 14,
        ..Default::default()
    };
    store.insert_approval("s", &approval).await.unwrap();
    assert_eq!(store.position("s", "p1").await.unwrap(), Some(4));
    let texts = store.message_texts("s").await.unwrap();
    assert_eq!(texts.len(), 4);
    assert!(texts.iter().all(|m| m.attachments.is_empty()));
}

async fn replies_finish_restart_and_checkpoint(store: Store) {
    session(&store, "s", None).await;
    store
        .insert_turn("s", &user("u1", None, 1), "a1", 1)
        .await
        .unwrap();
    store.checkpoint_reply("a1", "Half", &[]).await.unwrap();
    assert_eq!(
        store.message("s", "a1").await.unwrap().unwrap().content,
        "Half"
    );
    let error = WireError::new(ErrorCode::ProviderError, "upstream broke");
    let failed = store
        .finish_reply(
            "s",
            "a1",
            ReplyOutcome {
                status: MessageStatus::Failed,
                error: Some(&error),
                ..done("Half way")
            },
            None,
        )
        .await
        .unwrap()
        .0
        .unwrap();
    assert_eq!(failed.status, MessageStatus::Failed);
    assert_eq!(
        failed.error.as_ref().map(|e| e.code),
        Some(ErrorCode::ProviderError)
    );
    // A finished reply takes no checkpoint.
    store.checkpoint_reply("a1", "late", &[]).await.unwrap();
    assert_eq!(
        store.message("s", "a1").await.unwrap().unwrap().content,
        "Half way"
    );
    assert!(store.restart_reply("s", "a1").await.unwrap());
    assert!(
        !store.restart_reply("s", "a1").await.unwrap(),
        "streaming now"
    );
    assert!(
        !store.restart_reply("s", "u1").await.unwrap(),
        "not a reply"
    );
    let finished = store
        .finish_reply("s", "a1", done("Whole"), None)
        .await
        .unwrap()
        .0
        .unwrap();
    assert_eq!(
        (finished.content.as_str(), finished.status, finished.error),
        ("Whole", MessageStatus::Complete, None)
    );
    assert_eq!(finished.usage.map(|u| u.input_tokens), Some(12));
    assert_eq!(
        store
            .finish_reply("s", "gone", done("x"), None)
            .await
            .unwrap(),
        (None, None),
        "a reply that is gone is answered as gone"
    );
    let history = store.history_through("s", "u1").await.unwrap();
    assert_eq!(history.len(), 1);
}

async fn a_new_session_is_stored_with_its_first_turn(store: Store) {
    let settings = SessionSettings {
        agent: Some("helper".into()),
        ..SessionSettings::default()
    };
    let new = NewSession {
        id: "s",
        token_hash: "hash",
        created_at: 5,
        settings: &settings,
        user_id: Some("alice"),
    };
    let (message, reply) = store
        .insert_first_turn(&new, &user("u1", Some("c1"), 5), "a1")
        .await
        .unwrap();
    assert_eq!((message.id.as_str(), reply.id.as_str()), ("u1", "a1"));
    assert_eq!(reply.status, MessageStatus::Streaming);
    let row = store.session("s").await.unwrap().unwrap();
    assert_eq!(
        (row.token_hash.as_str(), row.user_id.as_deref()),
        ("hash", Some("alice"))
    );
    assert_eq!(
        store.settings("s").await.unwrap().agent.as_deref(),
        Some("helper")
    );
    // Its next turn is an ordinary one; the same id again is refused and changes nothing.
    store
        .insert_turn("s", &user("u2", None, 6), "a2", 6)
        .await
        .unwrap();
    assert!(
        store
            .insert_first_turn(&new, &user("u3", None, 7), "a3")
            .await
            .is_err()
    );
    assert_eq!(store.messages("s").await.unwrap().len(), 4);
}

async fn concurrent_turns_take_distinct_positions(store: Store) {
    session(&store, "s", None).await;
    let store = Arc::new(store);
    let turns = (0..16).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .insert_turn("s", &user(&format!("u{i}"), None, i), &format!("a{i}"), i)
                .await
                .map(|_| ())
        })
    });
    for turn in futures::future::join_all(turns).await {
        turn.unwrap().unwrap();
    }
    let mut positions = Vec::new();
    for m in store.messages("s").await.unwrap() {
        positions.push(store.position("s", &m.id).await.unwrap().unwrap());
    }
    assert_eq!(positions, (1..=32).collect::<Vec<i64>>());
}

async fn spending_adds_up_per_session_day_and_user(store: Store) {
    session(&store, "s1", Some("alice")).await;
    session(&store, "s2", Some("alice")).await;
    session(&store, "s3", None).await;
    assert_eq!(store.spend_tokens("s1", 100, 40).await.unwrap(), 40);
    assert_eq!(store.spend_tokens("s1", 100, 2).await.unwrap(), 42);
    store.spend_tokens("s2", 100, 8).await.unwrap();
    store.spend_tokens("s3", 101, 5).await.unwrap();
    let spent = store.tokens_spent("s1", 100).await.unwrap();
    assert_eq!(
        (spent.session, spent.server_day, spent.user_day),
        (42, 50, 50)
    );
    let spent = store.tokens_spent("s3", 101).await.unwrap();
    assert_eq!((spent.session, spent.server_day, spent.user_day), (5, 5, 0));
    assert_eq!(store.tokens_spent("nope", 99).await.unwrap().session, 0);
}

async fn a_finished_reply_settles_its_last_call(store: Store) {
    session(&store, "s1", Some("alice")).await;
    session(&store, "s2", None).await;
    let caps = Caps {
        session: 0,
        server_day: 0,
        user_day: 100,
    };
    let hold = Hold {
        id: "r1",
        session_id: "s1",
        day: 100,
        prompt: 10,
        output: 90,
        whole: false,
        now: 0,
        expires_at: 1_000,
    };
    assert_eq!(store.reserve_tokens(&hold, caps).await.unwrap(), Ok(90));
    store
        .insert_turn("s1", &user("u1", None, 1), "a1", 1)
        .await
        .unwrap();
    // The reply and its last call's 30 tokens in one write: the hold is gone, 30 are spent.
    let (reply, used) = store
        .finish_reply("s1", "a1", done("Done"), Some(spend(Some("r1"), 100, 30)))
        .await
        .unwrap();
    let reply = reply.unwrap();
    assert_eq!((reply.content.as_str(), used), ("Done", Some(30)));
    let spent = store.tokens_spent("s1", 100).await.unwrap();
    assert_eq!(
        (spent.session, spent.server_day, spent.user_day),
        (30, 30, 30)
    );
    assert_eq!(
        store
            .reserve_tokens(&Hold { id: "r2", ..hold }, caps)
            .await
            .unwrap(),
        Ok(60)
    );
    // An anonymous session's spend counts for the server's day only; a reply that is gone (its
    // session deleted meanwhile) is answered as gone, and its call's tokens are spent all the same.
    store
        .insert_turn("s2", &user("u2", None, 2), "a2", 2)
        .await
        .unwrap();
    let (_, used) = store
        .finish_reply("s2", "a2", done("Ok"), Some(spend(None, 100, 5)))
        .await
        .unwrap();
    assert_eq!(used, Some(5));
    assert_eq!(
        store
            .finish_reply("s2", "gone", done("x"), Some(spend(None, 100, 7)))
            .await
            .unwrap(),
        (None, Some(12))
    );
    let spent = store.tokens_spent("s2", 100).await.unwrap();
    assert_eq!(
        (spent.session, spent.server_day, spent.user_day),
        (12, 42, 0)
    );
}

async fn reservations_hold_tokens_until_settled_or_expired(store: Store) {
    session(&store, "s1", Some("alice")).await;
    session(&store, "s2", Some("alice")).await;
    store.spend_tokens("s1", 100, 40).await.unwrap();
    let caps = Caps {
        session: 0,
        server_day: 0,
        user_day: 100,
    };
    let hold = |id: &'static str, session_id: &'static str, now: i64| Hold {
        id,
        session_id,
        day: 100,
        prompt: 10,
        output: 1_000,
        whole: false,
        now,
        expires_at: now + 1_000,
    };
    // 60 left of alice's day: the prompt's 10, and a reply cut to 50.
    assert_eq!(
        store
            .reserve_tokens(&hold("r1", "s1", 0), caps)
            .await
            .unwrap(),
        Ok(50)
    );
    // All of it is held: her other session gets nothing until the first call ends.
    assert_eq!(
        store
            .reserve_tokens(&hold("r2", "s2", 1), caps)
            .await
            .unwrap(),
        Err(Reached::UserDay)
    );
    // It spent 25: 35 left.
    assert_eq!(
        store
            .settle_tokens("s1", spend(Some("r1"), 100, 25))
            .await
            .unwrap(),
        65
    );
    // A call that needs its whole reply cap is refused rather than cut.
    assert_eq!(
        store
            .reserve_tokens(
                &Hold {
                    whole: true,
                    ..hold("r3w", "s2", 2)
                },
                caps
            )
            .await
            .unwrap(),
        Err(Reached::UserDay)
    );
    assert_eq!(
        store
            .reserve_tokens(&hold("r3", "s2", 2), caps)
            .await
            .unwrap(),
        Ok(25)
    );
    // A holder that never settles (its process ended) holds until its reservation expires.
    assert_eq!(
        store
            .reserve_tokens(&hold("r4", "s2", 3), caps)
            .await
            .unwrap(),
        Err(Reached::UserDay)
    );
    assert_eq!(
        store
            .reserve_tokens(&hold("r5", "s2", 1_002), caps)
            .await
            .unwrap(),
        Ok(25)
    );
    // The session's and the server's caps count the same way; an anonymous session has no
    // user's cap.
    session(&store, "s3", None).await;
    let tight = Caps {
        session: 30,
        server_day: 200,
        user_day: 1,
    };
    assert_eq!(
        store
            .reserve_tokens(&hold("r8", "s3", 1_003), tight)
            .await
            .unwrap(),
        Ok(20)
    );
    assert_eq!(
        store
            .reserve_tokens(&hold("r9", "s3", 1_004), tight)
            .await
            .unwrap(),
        Err(Reached::Session)
    );
    store
        .settle_tokens("s3", spend(Some("r8"), 100, 30))
        .await
        .unwrap();
    assert_eq!(
        store
            .reserve_tokens(&hold("r10", "s3", 1_005), tight)
            .await
            .unwrap(),
        Err(Reached::Session)
    );
    // Expired reservations are pruned.
    assert!(store.prune_reservations(10_000).await.unwrap() >= 1);
    // Without caps nothing is counted or refused.
    assert_eq!(
        store
            .reserve_tokens(&hold("r6", "s1", 1_003), Caps::default())
            .await
            .unwrap(),
        Ok(1_000)
    );
}

async fn embeddings_are_cached_and_go_with_their_session(store: Store) {
    session(&store, "s", None).await;
    store
        .insert_turn("s", &user("m1", None, 1), "r1", 1)
        .await
        .unwrap();
    let vector = vec![0.25_f32, -1.5, 3.0e-8];
    store
        .put_embeddings(
            "minilm",
            &[
                ("m1:abc".into(), vector.clone()),
                ("item:x".into(), vec![1.0]),
            ],
        )
        .await
        .unwrap();
    // An existing key keeps its vector.
    store
        .put_embeddings("minilm", &[("m1:abc".into(), vec![9.0])])
        .await
        .unwrap();
    let keys = ["m1:abc".to_owned(), "item:x".into(), "none".into()];
    let found = store.cached_embeddings("minilm", &keys).await.unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(found["m1:abc"], vector);
    assert!(
        store
            .cached_embeddings("other", &keys)
            .await
            .unwrap()
            .is_empty()
    );
    // Many keys at once (past one statement's list).
    let many: Vec<(String, Vec<f32>)> = (0..1_200)
        .map(|i| (format!("k{i}"), vec![i as f32]))
        .collect();
    store.put_embeddings("minilm", &many).await.unwrap();
    let names: Vec<String> = many.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(
        store
            .cached_embeddings("minilm", &names)
            .await
            .unwrap()
            .len(),
        1_200
    );
    store.delete_embeddings("minilm", &names).await.unwrap();
    assert!(
        store
            .cached_embeddings("minilm", &names)
            .await
            .unwrap()
            .is_empty()
    );
    // The message's embedding goes with its session; the item's stays.
    assert_eq!(
        store.delete_session("s").await.unwrap(),
        Some(vec!["m1:abc".to_owned()])
    );
    let left = store.cached_embeddings("minilm", &keys).await.unwrap();
    assert_eq!(left.keys().collect::<Vec<_>>(), ["item:x"]);
}

async fn idle_sessions_are_found_and_deleted_unless_kept(store: Store) {
    for id in ["a", "b", "c", "d"] {
        session(&store, id, None).await;
    }
    store.touch_session("d", 500_000).await.unwrap();
    store
        .insert_turn("b", &user("mb", None, 1), "rb", 2_000)
        .await
        .unwrap();
    store
        .put_embeddings("m", &[("mb:h".into(), vec![1.0])])
        .await
        .unwrap();
    let idle = store
        .idle_sessions(100_000, &["a".to_owned()], 10)
        .await
        .unwrap();
    assert_eq!(idle, ["b", "c"]);
    assert_eq!(store.idle_sessions(100_000, &[], 1).await.unwrap(), ["a"]);
    let (deleted, keys) = store
        .delete_idle_sessions(&["b".into(), "c".into(), "d".into()], 100_000)
        .await
        .unwrap();
    assert_eq!(deleted, ["b", "c"], "d was used since");
    assert_eq!(keys, ["mb:h"]);
    assert!(store.session("b").await.unwrap().is_none());
    assert!(store.session("d").await.unwrap().is_some());
}

async fn files_are_bounded_and_read_back(store: Store) {
    session(&store, "s", None).await;
    session(&store, "t", None).await;
    let text = b"# notes\nplain text".to_vec();
    let image = vec![0x89, b'P', b'N', b'G', 0, 1, 2, 255];
    let file = |id: &'static str, kind, bytes: &'static [u8], at| NewFile {
        id,
        session_id: "s",
        name: "f",
        mime_type: "x/y",
        kind,
        dimensions: (kind == FileKind::Image).then_some((2, 3)),
        bytes,
        created_at: at,
    };
    let text: &'static [u8] = Box::leak(text.into_boxed_slice());
    let image: &'static [u8] = Box::leak(image.into_boxed_slice());
    assert_eq!(
        store
            .insert_file(&file("t1", FileKind::Text, text, 10), 0)
            .await
            .unwrap(),
        FileStored::Stored
    );
    assert_eq!(
        store
            .insert_file(&file("i1", FileKind::Image, image, 10), 0)
            .await
            .unwrap(),
        FileStored::Stored
    );
    // Past the server's cap: refused, saying how much is stored.
    let used = (text.len() + image.len()) as u64;
    assert_eq!(
        store
            .insert_file(&file("t2", FileKind::Text, text, 10), used + 1)
            .await
            .unwrap(),
        FileStored::ServerFull { used }
    );
    let rows = store.files("s", &["t1", "i1", "nope"]).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert!(
        store.files("t", &["t1"]).await.unwrap().is_empty(),
        "another session's"
    );
    let image_row = rows.iter().find(|r| r.id == "i1").unwrap();
    assert_eq!((image_row.width, image_row.height), (Some(2), Some(3)));
    assert_eq!(image_row.kind(), Some(FileKind::Image));
    let mut without = store.file_bytes("s", &["t1", "i1"], false).await.unwrap();
    without.sort_by(|a, b| a.0.id.cmp(&b.0.id));
    assert_eq!(
        without[0].1,
        Vec::<u8>::new(),
        "an image's bytes are left out"
    );
    assert_eq!(without[1].1, text);
    let with = store.file_bytes("s", &["i1"], true).await.unwrap();
    assert_eq!(with[0].1, image);
    // A file no message names is purged once old; one a message names stays.
    let named = [glassbox_core::vocab::Attachment {
        id: Some("t1".into()),
        name: "f".into(),
        ..Default::default()
    }];
    store
        .insert_turn(
            "s",
            &NewUserMessage {
                attachments: &named,
                ..user("u1", None, 20)
            },
            "a1",
            20,
        )
        .await
        .unwrap();
    assert_eq!(store.delete_unsent_files(5).await.unwrap(), 0, "too new");
    assert_eq!(store.delete_unsent_files(100).await.unwrap(), 1);
    assert_eq!(store.files("s", &["t1", "i1"]).await.unwrap().len(), 1);
    assert!(store.delete_file("s", "t1").await.unwrap());
    assert!(!store.delete_file("s", "t1").await.unwrap());
}

async fn topics_keep_the_newest_generation(store: Store) {
    session(&store, "s", None).await;
    let topics = |generation, sticky: &str| SessionTopics {
        sticky_ids: vec![sticky.to_owned()],
        generation,
        message_count: 4,
        ..Default::default()
    };
    assert!(store.topics("s").await.unwrap().is_none());
    assert_eq!(
        store.settings_and_topics("s").await.unwrap(),
        (SessionSettings::default(), None)
    );
    assert!(store.put_topics("s", &topics(2, "m2")).await.unwrap());
    assert!(
        !store.put_topics("s", &topics(1, "m1")).await.unwrap(),
        "older"
    );
    assert!(
        !store.put_topics("gone", &topics(9, "m9")).await.unwrap(),
        "no session"
    );
    assert_eq!(store.topics("s").await.unwrap(), Some(topics(2, "m2")));
    let changed = store
        .put_topics_and_settings("s", &topics(3, "m3"), |replaced, settings| {
            settings.agent = Some("after".into());
            replaced.map(|t| t.generation)
        })
        .await
        .unwrap();
    assert_eq!(changed, Some(Some(2)));
    let (settings, read) = store.settings_and_topics("s").await.unwrap();
    assert_eq!(
        (settings.agent.as_deref(), read),
        (Some("after"), Some(topics(3, "m3")))
    );
    assert_eq!(
        store.settings_and_topics("gone").await.unwrap(),
        (SessionSettings::default(), None)
    );
    assert_eq!(
        store.settings("s").await.unwrap().agent.as_deref(),
        Some("after")
    );
    let stale = store
        .put_topics_and_settings("s", &topics(1, "m1"), |_, settings| {
            settings.agent = Some("stale".into());
        })
        .await
        .unwrap();
    assert_eq!(stale, None);
    assert_eq!(
        store.settings("s").await.unwrap().agent.as_deref(),
        Some("after")
    );
}

/// 40 exchanges; every seventh reply failed and every eleventh stopped with only whitespace (neither
/// reaches the model); user message 2 pinned.
async fn history_is_read_in_pages_with_memories_and_unread(store: Store) {
    session(&store, "s", None).await;
    for i in 0..40 {
        let reply = format!("a{i:02}");
        store
            .insert_turn("s", &user(&format!("u{i:02}"), None, i), &reply, i)
            .await
            .unwrap();
        let (status, content) = match i {
            _ if i % 7 == 0 => (MessageStatus::Failed, "half"),
            _ if i % 11 == 0 => (MessageStatus::Stopped, " \u{3000}\u{a0}\n"),
            _ => (MessageStatus::Complete, "an answer"),
        };
        store
            .finish_reply(
                "s",
                &reply,
                ReplyOutcome {
                    status,
                    ..done(content)
                },
                None,
            )
            .await
            .unwrap();
    }
    store
        .set_mark("s", "u02", Some(MessageMark::Pinned))
        .await
        .unwrap();
    let before = store.position("s", "u30").await.unwrap().unwrap();
    let all = store.messages("s").await.unwrap();
    let older: Vec<_> = all[..(before - 1) as usize]
        .iter()
        .filter(|m| m.reaches_model())
        .collect();
    assert_eq!(
        store.unread_before("s", before).await.unwrap(),
        Some(Unread {
            count: older.len() as i64,
            first_id: older[0].id.clone(),
            last_id: older[older.len() - 1].id.clone(),
        })
    );
    assert_eq!(store.unread_before("s", 1).await.unwrap(), None);
    // Ends that do not reach the model: the first reply failed, and so did the one before u29.
    let before_u29 = store.position("s", "u29").await.unwrap().unwrap();
    let older: Vec<_> = all[..(before_u29 - 1) as usize]
        .iter()
        .filter(|m| m.reaches_model())
        .collect();
    assert_eq!(
        (older[0].id.as_str(), older[older.len() - 1].id.as_str()),
        ("u00", "u28")
    );
    assert_eq!(
        store.unread_before("s", before_u29).await.unwrap(),
        Some(Unread {
            count: older.len() as i64,
            first_id: "u00".into(),
            last_id: "u28".into(),
        })
    );
    // Past the newest, the newest that reaches is the last one (a39).
    assert_eq!(
        store
            .unread_before("s", before + 1_000)
            .await
            .unwrap()
            .map(|u| u.last_id),
        Some("a39".to_owned())
    );
    // A session that begins with messages that do not reach the model: the oldest that does is
    // found past them.
    session(&store, "t", None).await;
    for (i, id) in ["p1", "p2"].into_iter().enumerate() {
        let approval = ChatMessage {
            id: id.into(),
            role: Role::Approval,
            created_at: i as i64,
            ..Default::default()
        };
        store.insert_approval("t", &approval).await.unwrap();
    }
    store
        .insert_turn("t", &user("tu", None, 3), "ta", 3)
        .await
        .unwrap();
    store
        .finish_reply("t", "ta", done("an answer"), None)
        .await
        .unwrap();
    assert_eq!(
        store.unread_before("t", 5).await.unwrap(),
        Some(Unread {
            count: 2,
            first_id: "tu".into(),
            last_id: "ta".into(),
        })
    );
    assert_eq!(store.unread_before("t", 3).await.unwrap(), None);
    // Pages from the newest, and from an end past it.
    let newest = store
        .messages_before("s", PageEnd::Before(i64::MAX), 2)
        .await
        .unwrap();
    assert_eq!(
        newest
            .iter()
            .map(|(_, m)| m.id.as_str())
            .collect::<Vec<_>>(),
        ["a39", "u39"]
    );
    let beyond = store
        .messages_before("s", PageEnd::Before(before + 1_000), 1)
        .await
        .unwrap();
    assert_eq!(
        beyond[0].1.id, "a39",
        "an end past the newest reads from the newest"
    );
    let page = store
        .messages_before("s", PageEnd::Before(before), 3)
        .await
        .unwrap();
    let ids: Vec<(i64, &str)> = page.iter().map(|(p, m)| (*p, m.id.as_str())).collect();
    assert_eq!(
        ids,
        [
            (before - 1, "a29"),
            (before - 2, "u29"),
            (before - 3, "a28")
        ]
    );
    // Read as a turn reads history: the receipt and usage are left out.
    assert!(page.iter().all(|(_, m)| m.usage.is_none()));
    let through = store
        .messages_before("s", PageEnd::Through("a29"), 3)
        .await
        .unwrap();
    assert_eq!(through[0].1.id, "a29");
    assert!(
        store
            .messages_before("s", PageEnd::Through("nope"), 3)
            .await
            .unwrap()
            .is_empty()
    );
    let standing = ["u10", "a12", "a07", "u35", "nope"].map(String::from);
    let ids =
        |found: Vec<ChatMessage>| -> Vec<String> { found.into_iter().map(|m| m.id).collect() };
    assert_eq!(
        ids(store
            .memories_before("s", before, &standing, 128)
            .await
            .unwrap()),
        ["u02", "u10", "a12"]
    );
    assert_eq!(
        ids(store
            .memories_before("s", before, &standing, 0)
            .await
            .unwrap()),
        ["u10", "a12"]
    );
    let texts = store.message_texts_before("s", i64::MAX, 2).await.unwrap();
    assert_eq!(texts[0].1.id, "a39");
}

async fn summaries_and_marks_are_kept(store: Store) {
    session(&store, "s", None).await;
    store
        .insert_turn("s", &user("u1", None, 1), "a1", 1)
        .await
        .unwrap();
    assert_eq!(store.summary("s", "u1", "a1", "h").await.unwrap(), None);
    store
        .put_summary("s", ("u1", "a1", "h"), "They talked.", 5)
        .await
        .unwrap();
    store
        .put_summary("s", ("u1", "a1", "h"), "Again.", 6)
        .await
        .unwrap();
    assert_eq!(
        store
            .summary("s", "u1", "a1", "h")
            .await
            .unwrap()
            .as_deref(),
        Some("They talked.")
    );
    assert!(
        store
            .set_mark("s", "u1", Some(MessageMark::Excluded))
            .await
            .unwrap()
    );
    assert!(!store.set_mark("s", "nope", None).await.unwrap());
    assert_eq!(
        store.message("s", "u1").await.unwrap().unwrap().mark,
        Some(MessageMark::Excluded)
    );
}

async fn interrupted_replies_fail_at_start(store: Store) {
    session(&store, "s", None).await;
    store
        .insert_turn("s", &user("u1", None, 1), "a1", 1)
        .await
        .unwrap();
    let error = WireError::new(ErrorCode::Internal, "restarted");
    assert_eq!(store.fail_interrupted(&error).await.unwrap(), 1);
    let reply = store.message("s", "a1").await.unwrap().unwrap();
    assert_eq!(reply.status, MessageStatus::Failed);
    assert_eq!(reply.error.map(|e| e.message), Some("restarted".into()));
}

/// PostgreSQL: a call settled while its session is deleted (the delete holds the session's row,
/// then takes its reservations with it) waits for the delete, and neither fails. A settle that
/// took the reservation's row before the session's deadlocked with it, and one of the two failed
/// (a 500 on `DELETE /api/sessions/{id}` in CI).
#[tokio::test]
async fn on_postgres_a_call_settled_while_its_session_is_deleted_waits_for_it() {
    let store = postgres().await.store;
    session(&store, "s1", None).await;
    let hold = Hold {
        id: "r1",
        session_id: "s1",
        day: 100,
        prompt: 10,
        output: 100,
        whole: false,
        now: 0,
        expires_at: 1_000_000,
    };
    assert_eq!(
        store.reserve_tokens(&hold, Caps::default()).await.unwrap(),
        Ok(100)
    );
    let pool = store.postgres().expect("a PostgreSQL store").clone();
    // The delete's first step (`Store::delete_session`): the session's row.
    let mut deleting = pool.begin().await.unwrap();
    sqlx::query("SELECT id FROM sessions WHERE id = 's1' FOR NO KEY UPDATE")
        .execute(&mut *deleting)
        .await
        .unwrap();
    let settling = tokio::spawn({
        let store = store.clone();
        async move { store.settle_tokens("s1", spend(Some("r1"), 100, 60)).await }
    });
    // The settle runs what it can, then waits for the session's row.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !settling.is_finished(),
        "the settle did not wait for the session's row"
    );
    sqlx::query("DELETE FROM sessions WHERE id = 's1'")
        .execute(&mut *deleting)
        .await
        .expect("the delete (a deadlock fails one of the two after a second)");
    deleting.commit().await.unwrap();
    // The session is gone: nothing is added to it; the server's day counts the tokens spent.
    assert_eq!(settling.await.unwrap().unwrap(), 0);
    let day: i64 = sqlx::query_scalar("SELECT tokens FROM usage_days WHERE day = 100")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(day, 60);
}

/// `glassbox-server migrate`: everything in a SQLite database reaches a PostgreSQL one, and a
/// second copy adds nothing.
#[tokio::test]
async fn a_copy_from_sqlite_into_postgres_keeps_everything() {
    let from = sqlite().await;
    let to = postgres().await;
    let store = &from.store;
    session(store, "s", Some("alice")).await;
    for i in 0..700 {
        store
            .insert_turn("s", &user(&format!("u{i}"), None, i), &format!("a{i}"), i)
            .await
            .unwrap();
        store
            .finish_reply("s", &format!("a{i}"), done("an answer"), None)
            .await
            .unwrap();
    }
    store.spend_tokens("s", 3, 77).await.unwrap();
    store
        .put_embeddings("m", &[("u1:h".into(), vec![0.5, -0.25])])
        .await
        .unwrap();
    store
        .put_summary("s", ("u0", "a9", "h"), "sum", 1)
        .await
        .unwrap();
    store
        .put_topics(
            "s",
            &SessionTopics {
                generation: 4,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    store
        .insert_file(
            &NewFile {
                id: "f",
                session_id: "s",
                name: "n.txt",
                mime_type: "text/plain",
                kind: FileKind::Text,
                dimensions: None,
                bytes: b"\x00\x01bytes\xff",
                created_at: 1,
            },
            0,
        )
        .await
        .unwrap();
    let copied = to.store.copy_from(store, |_, _| {}).await.unwrap();
    let count = |name: &str| {
        copied
            .tables
            .iter()
            .find(|(t, _, _)| *t == name)
            .map(|(_, read, written)| (*read, *written))
    };
    assert_eq!(count("messages"), Some((1_400, 1_400)));
    assert_eq!(count("files"), Some((1, 1)));
    assert_eq!(
        to.store.messages("s").await.unwrap(),
        store.messages("s").await.unwrap()
    );
    assert_eq!(
        to.store.tokens_spent("s", 3).await.unwrap(),
        store.tokens_spent("s", 3).await.unwrap()
    );
    assert_eq!(
        to.store
            .cached_embeddings("m", &["u1:h".into()])
            .await
            .unwrap(),
        store
            .cached_embeddings("m", &["u1:h".into()])
            .await
            .unwrap()
    );
    assert_eq!(
        to.store.topics("s").await.unwrap(),
        store.topics("s").await.unwrap()
    );
    assert_eq!(
        to.store.file_bytes("s", &["f"], true).await.unwrap(),
        store.file_bytes("s", &["f"], true).await.unwrap()
    );
    assert_eq!(to.store.user_sessions("alice").await.unwrap().len(), 1);
    // Again: every row is there already.
    let again = to.store.copy_from(store, |_, _| {}).await.unwrap();
    assert!(
        again.tables.iter().all(|(_, _, written)| *written == 0),
        "{again:?}"
    );
}
