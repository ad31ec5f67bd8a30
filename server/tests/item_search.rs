//! Choosing agent items per message on the real server: the example of docs/item-selection.md with
//! deterministic vectors (put in the embedding cache and memory, so the model computes nothing),
//! and the demo agent's dozen references with the real MiniLM model, where the obviously relevant
//! one wins and a restart embeds none of the items again.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use glassbox_analysis::item_search::{self, MAX_CHUNK_CHARS};
use glassbox_core::context::Score;
use glassbox_core::context::items::{Included, ItemKind, ItemRef, RequestItem};
use glassbox_fake_provider::Behaviour;
use glassbox_server::items::{SearchStatus, chunk_key, query_key};
use serde_json::json;
use support::{Api, TestServer};

fn model_dir() -> PathBuf {
    std::env::var_os("GLASSBOX_EMBED_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(glassbox_server::config::default_model_dir)
}

async fn start(config: &str) -> TestServer {
    let dir = model_dir().display().to_string();
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["ok"]),
        &[
            ("GLASSBOX_EMBEDDINGS", "on"),
            ("GLASSBOX_EMBED_MODEL_DIR", dir.as_str()),
            ("GLASSBOX_CONFIG", config),
        ],
    )
    .await;
    for _ in 0..600 {
        let health = server.get_json("/healthz").await;
        if health["embeddings"]["status"] != "loading" {
            assert_eq!(health["embeddings"]["status"], "ready", "{health}");
            return server;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the embedding model did not load");
}

fn unit(v: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

/// The agent of docs/item-selection.md's example: Rule A (always), Rule B (manual), Rule C (agent),
/// Reference X (always), Reference Y (agent); one item chosen by search per request.
fn flow_agent(dir: &Path) -> String {
    let items = dir.join("items");
    std::fs::create_dir_all(&items).unwrap();
    for (file, kind, name, include, priority) in [
        ("a.md", "rule", "Rule A", "always", 1),
        ("b.md", "rule", "Rule B", "manual", 2),
        ("c.md", "rule", "Rule C", "agent", 3),
        ("x.md", "reference", "Reference X", "always", 1),
        ("y.md", "reference", "Reference Y", "agent", 2),
    ] {
        std::fs::write(
            items.join(file),
            format!("---\ntype: {kind}\nname: {name}\ninclude: {include}\npriority: {priority}\n---\nThe text of {name}.\n"),
        )
        .unwrap();
    }
    let file = dir.join("glassbox.toml");
    std::fs::write(
        &file,
        "[[agents]]\nname = \"flow\"\nitems = \"items\"\ncontext_top_n = 1\n",
    )
    .unwrap();
    file.display().to_string()
}

fn summary(items: &[RequestItem]) -> Vec<String> {
    items
        .iter()
        .map(|r| {
            let score = r
                .score
                .map(|s| format!(" {:.2}", s.value()))
                .unwrap_or_default();
            format!("{} ({}){score}", r.item.name, r.included)
        })
        .collect()
}

#[tokio::test]
async fn the_flow_example_with_deterministic_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&flow_agent(dir.path())).await;
    let state = &server.state;
    // Each item's one chunk gets a vector of its own; the two questions get theirs.
    let vectors: [(&str, &str, [f32; 3]); 5] = [
        ("Rule A", "rule", [0.0, 0.0, 1.0]),
        ("Rule B", "rule", [0.0, 0.6, 0.8]),
        ("Rule C", "rule", [1.0, 0.0, 0.0]),
        ("Reference X", "reference", [0.6, 0.0, 0.8]),
        ("Reference Y", "reference", [0.0, 1.0, 0.0]),
    ];
    let mut cached = Vec::new();
    for (name, _, v) in &vectors {
        let text = item_search::index_text(name, "", Some(&format!("The text of {name}.")));
        for chunk in item_search::chunk(&text, MAX_CHUNK_CHARS) {
            cached.push((chunk_key(chunk), v.to_vec()));
        }
    }
    state
        .store
        .put_embeddings(&state.embeddings.model, &cached)
        .await
        .unwrap();
    let q1 = "How do I authenticate?";
    let q2 = "What's the error handling?";
    state.embeddings.remember([
        (query_key(q1), Arc::from(unit(&[0.92, 0.3919, 0.0]))),
        (query_key(q2), Arc::from(unit(&[0.2, 0.87, 0.4507]))),
    ]);

    // Session creation: A and X ('always', by priority, then name); the user adds B.
    let created = server.post_json("/api/sessions", &json!({})).await;
    let (id, token) = (
        created["sessionId"].as_str().unwrap(),
        created["token"].as_str().unwrap(),
    );
    let added = server
        .http
        .post(server.url(&format!("/api/sessions/{id}/items")))
        .bearer_auth(token)
        .json(&json!({"item": {"kind": "rule", "name": "Rule B"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 200);
    let settings = state.store.settings(id).await.unwrap();

    let first = state.items.request_context(&settings, q1).await;
    assert_eq!(first.status, SearchStatus::Done);
    let items: Vec<RequestItem> = first.items.iter().map(|(r, _)| r.clone()).collect();
    assert_eq!(
        summary(&items),
        [
            "Reference X (always)",
            "Rule A (always)",
            "Rule B (manual)",
            "Rule C (agent) 0.92"
        ]
    );
    assert_eq!(items[3].score, Some(Score::of(0.92)));
    // Y was the best of the rest.
    assert_eq!(
        first.near_misses[0].0.item,
        ItemRef::reference("Reference Y")
    );

    let second = state.items.request_context(&settings, q2).await;
    let items: Vec<RequestItem> = second.items.iter().map(|(r, _)| r.clone()).collect();
    assert_eq!(
        summary(&items),
        [
            "Reference X (always)",
            "Rule A (always)",
            "Rule B (manual)",
            "Reference Y (agent) 0.87"
        ]
    );
    assert!(!items.iter().any(|r| r.item.name == "Rule C"));

    // Through real turns: each reply's receipt lists its items (rules, then references), and
    // the provider got exactly those texts.
    let item_parts = |body: &serde_json::Value| -> Vec<String> {
        body["reply"]["receipt"]["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["kind"] == "item")
            .map(|p| {
                let score = p["score"]
                    .as_f64()
                    .map(|s| format!(" {s:.2}"))
                    .unwrap_or_default();
                format!("{} {} ({}){score}", p["type"], p["name"], p["include"]).replace('"', "")
            })
            .collect()
    };
    let body = server.chat(id, token, q1).await;
    assert_eq!(
        item_parts(&body),
        [
            "rule Rule A (always)",
            "rule Rule B (manual)",
            "rule Rule C (agent) 0.92",
            "reference Reference X (always)"
        ],
        "{body}"
    );
    let sent = server.fake.requests().last().unwrap().body.to_string();
    assert!(sent.contains("The text of Rule C."), "{sent}");
    assert!(!sent.contains("The text of Reference Y."), "{sent}");
    let body = server.chat(id, token, q2).await;
    assert_eq!(
        item_parts(&body),
        [
            "rule Rule A (always)",
            "rule Rule B (manual)",
            "reference Reference X (always)",
            "reference Reference Y (agent) 0.87"
        ],
        "{body}"
    );
    let sent = server.fake.requests().last().unwrap().body.to_string();
    assert!(sent.contains("The text of Reference Y."), "{sent}");
    assert!(!sent.contains("The text of Rule C."), "{sent}");
    // The near miss is in the receipt's left-out list with its score.
    let left_out = body["reply"]["receipt"]["leftOut"].to_string();
    assert!(
        left_out.contains("Rule C") && left_out.contains("below_threshold"),
        "{left_out}"
    );
    assert_eq!(
        state.embeddings.computed(),
        0,
        "every vector came from the cache and memory"
    );
}

#[tokio::test]
async fn the_relevant_reference_wins_among_a_dozen_and_a_restart_embeds_no_item_again() {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../glassbox.toml");
    let server = start(&config.display().to_string()).await;
    let created = server.post_json("/api/sessions", &json!({})).await;
    let id = created["sessionId"].as_str().unwrap().to_owned();
    let settings = server.state.store.settings(&id).await.unwrap();
    let ask = "How long should my sourdough loaf bake in the Dutch oven, and how hot?";
    let found = server.state.items.request_context(&settings, ask).await;
    assert_eq!(found.status, SearchStatus::Done);
    let all: Vec<RequestItem> = found.items.iter().map(|(r, _)| r.clone()).collect();
    eprintln!("chosen: {:?}", summary(&all));
    let misses: Vec<RequestItem> = found.near_misses.iter().map(|(r, _)| r.clone()).collect();
    eprintln!("near misses: {:?}", summary(&misses));
    let chosen: Vec<&RequestItem> = found
        .items
        .iter()
        .map(|(r, _)| r)
        .filter(|r| r.included == Included::Agent)
        .collect();
    let best = chosen
        .iter()
        .max_by(|a, b| a.score.cmp(&b.score))
        .expect("the search chose an item");
    assert_eq!(
        best.item,
        ItemRef::reference("Sourdough bread"),
        "{chosen:?}"
    );
    assert!(best.score.unwrap().value() > 0.5, "{best:?}");
    assert!(
        !chosen.iter().any(|r| r.item.name == "Black holes"),
        "{chosen:?}"
    );
    // The near misses score below the winner, best first.
    let misses: Vec<f32> = found
        .near_misses
        .iter()
        .filter_map(|(r, _)| r.score.map(|s| s.value()))
        .collect();
    assert!(!misses.is_empty());
    assert!(misses.windows(2).all(|w| w[0] >= w[1]), "{misses:?}");
    assert!(misses[0] <= best.score.unwrap().value());
    assert!(matches!(best.item.kind, ItemKind::Reference));

    // After a restart the items' vectors come from the database: only the question is embedded.
    let server = server.restart().await;
    for _ in 0..600 {
        if server.get_json("/healthz").await["embeddings"]["status"] == "ready" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let again = server.state.items.request_context(&settings, ask).await;
    assert_eq!(again.status, SearchStatus::Done);
    assert_eq!(
        server.state.embeddings.computed(),
        1,
        "one sentence embedded, no item chunk"
    );
    let same: Vec<&RequestItem> = again.items.iter().map(|(r, _)| r).collect();
    assert_eq!(same, found.items.iter().map(|(r, _)| r).collect::<Vec<_>>());
}
