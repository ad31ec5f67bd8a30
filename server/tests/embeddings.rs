//! The embedding engine against sentence-transformers' own output, and the `/v1/embeddings` API.
//! Needs the model provisioned by `cargo xtask model` (which `cargo xtask test` runs first).

mod support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use glassbox_core::vector::cosine;
use glassbox_fake_provider::Behaviour;
use glassbox_server::embed::{Embedder, MAX_TOKENS};
use serde_json::{Value, json};
use support::{Api, TestServer};

fn model_dir() -> PathBuf {
    std::env::var_os("GLASSBOX_EMBED_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(glassbox_server::config::default_model_dir)
}

/// One loaded model for the whole file (loading optimizes the graph, which takes a moment): the
/// converted model, which runs its tensor-parallel shards on two threads.
fn embedder() -> &'static Embedder {
    static EMBEDDER: OnceLock<Embedder> = OnceLock::new();
    EMBEDDER.get_or_init(|| match Embedder::load(&model_dir(), 2) {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    })
}

/// The same model as a plain ONNX file (no shards beside it): runs as one plan, as any
/// sentence-transformers export would.
fn whole_model_embedder() -> &'static Embedder {
    static EMBEDDER: OnceLock<Embedder> = OnceLock::new();
    EMBEDDER.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("glassbox-whole-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        link_model_files(&dir, &["model.onnx", "tokenizer.json"]);
        match Embedder::load(&dir, 2) {
            Ok(e) => e,
            Err(e) => panic!("{e}"),
        }
    })
}

fn both_engines() -> [(&'static str, &'static Embedder); 2] {
    [
        ("shards", embedder()),
        ("whole model", whole_model_embedder()),
    ]
}

/// A test server with the embedding model switched on, plus `extra` settings.
async fn start_with_model(extra: &[(&str, &str)]) -> TestServer {
    let dir = model_dir().display().to_string();
    let mut vars = vec![
        ("GLASSBOX_EMBEDDINGS", "on"),
        ("GLASSBOX_EMBED_MODEL_DIR", dir.as_str()),
    ];
    vars.extend_from_slice(extra);
    TestServer::start_with(Api::OpenAi, Behaviour::reply(&["x"]), &vars).await
}

/// Polls `/healthz` until the embedding model is no longer loading; returns the last health document.
async fn wait_for_embeddings(server: &TestServer) -> Value {
    let mut health = Value::Null;
    for _ in 0..300 {
        health = server.get_json("/healthz").await;
        if health["embeddings"]["status"] != "loading" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    health
}

struct Reference {
    text: String,
    embedding: Vec<f32>,
}

fn references() -> Vec<Reference> {
    let raw: Value = serde_json::from_str(include_str!("fixtures/minilm-l6-v2-reference.json"))
        .expect("fixture is JSON");
    raw["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| Reference {
            text: item["text"].as_str().expect("text").to_owned(),
            embedding: item["embedding"]
                .as_array()
                .expect("embedding")
                .iter()
                .map(|x| x.as_f64().expect("number") as f32)
                .collect(),
        })
        .collect()
}

#[test]
fn every_reference_sentence_matches_sentence_transformers() {
    let refs = references();
    assert!(refs.len() >= 13);
    for (engine, e) in both_engines() {
        assert_eq!(e.dimension(), 384);
        let mut worst = f32::MAX;
        for r in &refs {
            let got = e.embed(&[r.text.as_str()]).expect("embed");
            let cos = cosine(&got[0].vector, &r.embedding);
            assert!(cos >= 0.9999, "{engine}: cosine {cos} for {:?}", r.text);
            worst = worst.min(cos);
        }
        eprintln!(
            "{engine}: lowest cosine to sentence-transformers over {} sentences: {worst:.8}",
            refs.len()
        );
    }
}

#[test]
fn a_batch_gives_the_same_vectors_as_one_at_a_time() {
    let refs = references();
    let texts: Vec<&str> = refs.iter().map(|r| r.text.as_str()).collect();
    for (engine, e) in both_engines() {
        let batched = e.embed(&texts).expect("batch");
        for (text, b) in texts.iter().zip(&batched) {
            let single = &e.embed(&[text]).expect("single")[0];
            assert_eq!(single.tokens, b.tokens);
            let worst = max_drift(&single.vector, &b.vector);
            assert!(
                worst < 1e-5,
                "{engine}: batched differs by {worst} for {text:?}"
            );
        }
    }
}

#[test]
fn long_input_is_truncated_and_flagged() {
    let long = "word ".repeat(MAX_TOKENS * 2);
    let e = embedder();
    let out = e.embed(&[long.as_str(), "short"]).expect("embed");
    assert!(out[0].truncated);
    assert_eq!(out[0].tokens, MAX_TOKENS);
    assert!(!out[1].truncated);
}

/// Links `names` of the provisioned model into `dir`.
/// The largest difference between two vectors' components.
fn max_drift(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max)
}

fn link_model_files(dir: &Path, names: &[&str]) {
    for name in names {
        let _ = std::fs::remove_file(dir.join(name));
        std::os::unix::fs::symlink(model_dir().join(name), dir.join(name)).expect("link");
    }
}

/// Loading `dir` fails, and the message names `file`, says `what` went wrong and gives the fix.
fn assert_load_error(dir: &Path, file: &str, what: &str) {
    let err = Embedder::load(dir, 2)
        .err()
        .unwrap_or_else(|| panic!("loading with a {what} {file} must fail"))
        .to_string();
    assert!(
        err.contains(file) && err.contains(what) && err.contains("cargo xtask model"),
        "{err}"
    );
}

#[test]
fn a_missing_or_corrupt_model_names_the_file_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    assert_load_error(dir.path(), "model.onnx", "missing");
    link_model_files(dir.path(), &["tokenizer.json"]);
    std::fs::write(dir.path().join("model.onnx"), b"this is not an onnx file").unwrap();
    assert_load_error(dir.path(), "model.onnx", "cannot be loaded");
}

#[test]
fn a_corrupt_or_missing_shard_names_the_file_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    link_model_files(dir.path(), &["model.onnx", "tokenizer.json"]);
    std::fs::create_dir(dir.path().join("shards")).unwrap();
    let names: Vec<String> = std::fs::read_dir(model_dir().join("shards"))
        .unwrap()
        .map(|e| format!("shards/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    link_model_files(
        dir.path(),
        &names.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let shard = dir.path().join("shards/layer3.ffn1.onnx");
    std::fs::remove_file(&shard).unwrap();
    std::fs::write(&shard, b"truncated").unwrap();
    assert_load_error(dir.path(), "layer3.ffn1.onnx", "cannot be loaded");
    std::fs::remove_file(&shard).unwrap();
    assert_load_error(dir.path(), "layer3.ffn1.onnx", "missing");
}

#[tokio::test]
async fn the_openai_shaped_endpoint_embeds_and_health_reports_readiness() {
    let server = start_with_model(&[]).await;
    let health = wait_for_embeddings(&server).await;
    assert_eq!(health["embeddings"]["status"], "ready", "{health}");
    assert_eq!(health["embeddings"]["dimension"], 384);

    let refs = references();
    let resp = server
        .post(
            "/v1/embeddings",
            &json!({"input": [refs[0].text, refs[1].text], "model": "all-MiniLM-L6-v2"}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["object"], "list");
    assert_eq!(body["data"].as_array().unwrap().len(), 2);
    for (i, r) in refs.iter().take(2).enumerate() {
        let v: Vec<f32> = body["data"][i]["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        assert!(cosine(&v, &r.embedding) >= 0.9999);
        assert_eq!(body["data"][i]["index"], i);
    }
    assert!(body["usage"]["prompt_tokens"].as_u64().unwrap() > 0);

    let single: Value = server
        .post_json("/v1/embeddings", &json!({"input": "one string"}))
        .await;
    assert_eq!(single["data"].as_array().unwrap().len(), 1);

    let wrong = server
        .post("/v1/embeddings", &json!({"input": "x", "model": "other"}))
        .await;
    assert_eq!(wrong.status(), 403);
    let empty = server.post("/v1/embeddings", &json!({"input": []})).await;
    assert_eq!(empty.status(), 400);
}

#[tokio::test]
async fn without_a_model_chat_still_works_and_embeddings_say_why() {
    let missing = tempfile::tempdir().unwrap();
    let dir = missing.path().display().to_string();
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["still chatting"]),
        &[
            ("GLASSBOX_EMBEDDINGS", "on"),
            ("GLASSBOX_EMBED_MODEL_DIR", &dir),
        ],
    )
    .await;
    let body: Value = server
        .post_json("/api/chat", &json!({"message": "hi"}))
        .await;
    assert_eq!(body["reply"]["content"], "still chatting");
    let health = wait_for_embeddings(&server).await;
    assert_eq!(health["embeddings"]["status"], "failed");
    assert!(
        health["embeddings"]["error"]
            .as_str()
            .unwrap()
            .contains("cargo xtask model")
    );
    let resp = server.post("/v1/embeddings", &json!({"input": "x"})).await;
    assert_eq!(resp.status(), 503);
    assert_eq!(
        resp.json::<Value>().await.unwrap()["error"]["code"],
        "embeddings_unavailable"
    );
}

#[tokio::test]
async fn a_cache_hit_computes_nothing() {
    use glassbox_server::embed::service::{Urgency, content_hash, message_cache_key};
    use glassbox_server::embed::{EmbedStatus, EmbeddingService, Limits};

    let data = tempfile::tempdir().unwrap();
    let store = glassbox_server::storage::Store::open(data.path())
        .await
        .unwrap();
    let service = EmbeddingService::start(
        "all-MiniLM-L6-v2".into(),
        model_dir(),
        Limits {
            workers: 1,
            queue: 4,
            threads: 2,
        },
    );
    while service.status() == EmbedStatus::Loading {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let items = vec![
        (
            message_cache_key("m1", "How do I reset my password?"),
            "How do I reset my password?".to_owned(),
        ),
        (
            content_hash("Passwords are reset from Settings."),
            "Passwords are reset from Settings.".to_owned(),
        ),
    ];
    let first = service.embed_cached(&store, items.clone()).await.unwrap();
    assert_eq!(service.computed(), 2);
    let again = service.embed_cached(&store, items.clone()).await.unwrap();
    assert_eq!(
        service.computed(),
        2,
        "cached vectors are not computed again"
    );
    assert_eq!(first, again);

    let mut more = items.clone();
    more.push((message_cache_key("m2", "Thanks!"), "Thanks!".to_owned()));
    let third = service.embed_cached(&store, more).await.unwrap();
    assert_eq!(service.computed(), 3, "only the missing vector is computed");
    assert_eq!(third[..2], first[..]);
    assert!((cosine(&third[0], &third[1]) - cosine(&first[0], &first[1])).abs() < 1e-6);

    // On the background thread (the sharded model alone, without its helpers) a text gets the
    // vector it gets now, with the helpers.
    let texts: Vec<String> = vec![
        "How do I reset my password?".into(),
        "Thanks!".into(),
        "Kubernetes pods restart when their liveness probe fails three times in a row.".repeat(4),
    ];
    let now = service.embed(texts.clone()).await.unwrap();
    let background = service
        .embed_with(texts, Urgency::Background)
        .await
        .unwrap();
    for (a, b) in now.iter().zip(&background) {
        let drift = max_drift(&a.vector, &b.vector);
        assert!(drift < 1e-5, "background vector differs by {drift}");
    }
}

#[tokio::test]
async fn overload_is_refused_with_429() {
    let server = start_with_model(&[
        ("GLASSBOX_EMBED_WORKERS", "1"),
        ("GLASSBOX_EMBED_QUEUE", "1"),
    ])
    .await;
    assert_eq!(
        wait_for_embeddings(&server).await["embeddings"]["status"],
        "ready"
    );
    let texts: Vec<String> = (0..24)
        .map(|i| format!("sentence number {i} ").repeat(20))
        .collect();
    let requests = (0..6).map(|_| {
        server
            .http
            .post(server.url("/v1/embeddings"))
            .json(&json!({"input": texts}))
            .send()
    });
    let answers = futures::future::join_all(requests).await;
    let mut statuses = vec![];
    for a in answers {
        let resp = a.unwrap();
        let status = resp.status().as_u16();
        if status == 429 {
            assert_eq!(
                resp.json::<Value>().await.unwrap()["error"]["code"],
                "overloaded"
            );
        }
        statuses.push(status);
    }
    assert!(statuses.contains(&200), "{statuses:?}");
    assert!(statuses.contains(&429), "{statuses:?}");
}
