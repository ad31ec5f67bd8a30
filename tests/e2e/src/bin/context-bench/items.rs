//! Agents' items (issue 29): one agent of 100 generated references (about 1,000 chunks) on a real
//! server in this process, with the real embedding model and the offline provider:
//! - cold indexing: the chunks embedded through the server's own path (`Items::request_context`
//!   on empty caches), beside onnxruntime embedding the same chunk texts, passes alternating;
//! - the warm request context (goal ≤ 5 ms p50), and where its time goes;
//! - the preview round trip over loopback HTTP (goal ≤ 15 ms p50), beside `GET /healthz`.

use std::collections::HashSet;
use std::ffi::OsString;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use glassbox_analysis::item_search::{self, Candidate, MAX_CHUNK_CHARS, NEAR_MISSES};
use glassbox_core::context::SessionSettings;
use glassbox_core::context::agent_settings::AgentSettings;
use glassbox_e2e::ort_anchor::OrtAnchor;
use glassbox_e2e::{Server, start_server};
use glassbox_server::agents::{Agent, Item};
use glassbox_server::embed::EmbedStatus;
use glassbox_server::embed::service::content_hash;
use glassbox_server::items::{Items, SearchStatus, chunk_key, query_key};
use glassbox_server::storage::Store;
use serde_json::{Value, json};

use super::{Rng, percentile};

/// What the section needs from outside: the Python of the bench venv (with onnxruntime), the
/// anchor script and the embedding model's folder (shared by the server and onnxruntime).
pub struct ItemsBenchArgs {
    pub python: OsString,
    pub script: OsString,
    pub model_dir: PathBuf,
}

/// The agent's name in the generated configuration.
const AGENT: &str = "bench";
const ITEMS: usize = 100;
/// Paragraphs per item; each is one chunk, and the item's `name: description` another.
const PARAGRAPHS: usize = 9;
/// A paragraph gets sentences until it has this many characters (it stays under
/// `MAX_CHUNK_CHARS`, so it is one chunk).
const PARAGRAPH_CHARS: usize = 320;
/// Timed cold passes of each side, after the first (the server's own, and onnxruntime's warm-up).
const INDEX_PASSES: usize = 3;
/// onnxruntime's batch: the server runs its requests in batches of 32 too (`RUN_BATCH`).
const ORT_BATCH: usize = 32;
/// Distinct messages of the warm request context (and of the drafts previewed warm).
const MESSAGES: usize = 50;
const WARM_CALLS: usize = 250;
/// Exchanges sent before the previews (twice as many messages in the session).
const HISTORY_CHATS: usize = 10;
const PREVIEWS: usize = 200;
const PREVIEW_WARMUP: usize = 20;
/// The anchor of the warm request context: ~10 ms per 100 documents (docs/item-selection.md, Cost).
const ANCHOR_MS: f64 = 10.0;
const CONTEXT_GOAL_MS: f64 = 5.0;
const PREVIEW_GOAL_MS: f64 = 15.0;
/// The message of the cold passes (one sentence, embedded with the chunks).
const COLD_MESSAGE: &str = "How should I keep the starter healthy between bakes?";

/// A subject the items and messages are about: its name and the terms its prose uses.
struct Subject {
    name: &'static str,
    terms: [&'static str; 6],
}

// Laid out by hand: each subject's terms in two rows of three.
#[rustfmt::skip]
const SUBJECTS: [Subject; 20] = [
    Subject {
        name: "sourdough baking",
        terms: ["the starter", "the levain", "bulk fermentation",
                "the crumb", "the Dutch oven", "dough hydration"],
    },
    Subject {
        name: "Kubernetes networking",
        terms: ["the ingress controller", "service discovery", "network policies",
                "the CNI plugin", "pod DNS", "load balancer health checks"],
    },
    Subject {
        name: "chess openings",
        terms: ["the Sicilian defence", "pawn structure", "minor piece development",
                "early castling", "the centre squares", "opening traps"],
    },
    Subject {
        name: "home tax filing",
        terms: ["deductible expenses", "the filing deadline", "donation receipts",
                "the withholding form", "capital gains", "estimated payments"],
    },
    Subject {
        name: "bicycle repair",
        terms: ["the derailleur", "the brake pads", "chain lubrication",
                "tyre pressure", "the bottom bracket", "spoke tension"],
    },
    Subject {
        name: "houseplant care",
        terms: ["watering frequency", "indirect light", "root rot",
                "the potting soil", "air humidity", "spring fertiliser"],
    },
    Subject {
        name: "espresso brewing",
        terms: ["the grind size", "extraction time", "the portafilter",
                "milk steaming", "water temperature", "bean freshness"],
    },
    Subject {
        name: "marathon training",
        terms: ["the long run", "tempo sessions", "carbohydrate loading",
                "the taper", "recovery days", "running shoes"],
    },
    Subject {
        name: "Rust ownership",
        terms: ["the borrow checker", "lifetime annotations", "mutable references",
                "moved values", "smart pointers", "the drop order"],
    },
    Subject {
        name: "HTTP caching",
        terms: ["the Cache-Control header", "ETags", "conditional requests",
                "the CDN", "stale-while-revalidate", "cache invalidation"],
    },
    Subject {
        name: "black holes",
        terms: ["the event horizon", "Hawking radiation", "the accretion disk",
                "gravitational lensing", "spacetime curvature", "stellar collapse"],
    },
    Subject {
        name: "photosynthesis",
        terms: ["chlorophyll", "the light reactions", "the Calvin cycle",
                "carbon dioxide uptake", "the stomata", "glucose production"],
    },
    Subject {
        name: "git workflows",
        terms: ["feature branches", "rebasing", "merge conflicts",
                "the commit history", "pull requests", "release tags"],
    },
    Subject {
        name: "vegetable gardening",
        terms: ["crop rotation", "seed spacing", "the compost heap",
                "tomato blight", "mulching", "the first frost"],
    },
    Subject {
        name: "personal budgeting",
        terms: ["the emergency fund", "monthly expenses", "credit card interest",
                "savings goals", "subscriptions", "the spending log"],
    },
    Subject {
        name: "dog training",
        terms: ["recall commands", "leash pulling", "positive reinforcement",
                "crate training", "socialisation", "treat timing"],
    },
    Subject {
        name: "watercolour painting",
        terms: ["wet-on-wet washes", "paper weight", "pigment granulation",
                "masking fluid", "colour mixing", "drying time"],
    },
    Subject {
        name: "sleep hygiene",
        terms: ["the bedtime routine", "screen light", "afternoon caffeine",
                "bedroom temperature", "daytime naps", "the wake-up time"],
    },
    Subject {
        name: "home wifi",
        terms: ["router placement", "channel interference", "mesh nodes",
                "the 5 GHz band", "firmware updates", "signal strength"],
    },
    Subject {
        name: "sailing",
        terms: ["sail trim", "tacking", "the wind direction",
                "reefing", "the tide tables", "knots and lines"],
    },
];

/// The items' sentences: `{s}` the subject, `{a}` `{b}` `{c}` three distinct terms (`{A}`: `{a}`
/// capitalized).
const STATEMENTS: [&str; 12] = [
    "{A} depends on {b} more than most people expect.",
    "When {a} goes wrong, check {b} before you change {c}.",
    "A common mistake in {s} is to rush {a}; give {b} the time it needs.",
    "Keep notes on {a} and {b}, so the next attempt starts from what worked.",
    "{A} and {b} interact: changing one shifts the other.",
    "Experienced people in {s} adjust {a} by feel, but beginners should measure it.",
    "Check {a} again every time {b} changes.",
    "If {a} looks unusual, compare it with {b} from an earlier attempt.",
    "Most trouble with {a} traces back to {b}.",
    "Start with {a}, then {b}, and leave {c} for last.",
    "In {s}, {a} matters most at the beginning and {b} at the end.",
    "Small changes to {a} can have large effects on {b}.",
];

/// The messages' sentences (same placeholders).
const QUESTIONS: [&str; 10] = [
    "How should I handle {a} in {s}?",
    "What usually causes problems with {a}?",
    "Things go wrong with {a} whenever I change {b}.",
    "Is it worth measuring {a} every time?",
    "Can you explain how {a} affects {b}?",
    "I am new to {s}.",
    "What should I check first when {a} looks wrong?",
    "Thanks, that helped with {a}.",
    "Which matters more in {s}, {a} or {b}?",
    "Please keep the answer short.",
];

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// `template` about `subject`, with three distinct terms drawn from `rng`.
fn fill(template: &str, subject: &Subject, rng: &mut Rng) -> String {
    let n = subject.terms.len();
    let a = rng.below(n);
    let b = (a + 1 + rng.below(n - 1)) % n;
    let c = (0..n)
        .map(|k| (b + 1 + k) % n)
        .find(|&k| k != a)
        .unwrap_or(a);
    let [a, b, c] = [a, b, c].map(|k| subject.terms[k]);
    template
        .replace("{A}", &capitalize(a))
        .replace("{a}", a)
        .replace("{b}", b)
        .replace("{c}", c)
        .replace("{s}", subject.name)
}

/// One paragraph of an item about `subject`: sentences until it has `PARAGRAPH_CHARS`.
fn paragraph(subject: &Subject, rng: &mut Rng) -> String {
    let mut out = String::new();
    while out.len() < PARAGRAPH_CHARS {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&fill(STATEMENTS[rng.below(STATEMENTS.len())], subject, rng));
    }
    out
}

/// Writes the agent's `ITEMS` reference files (`include: agent`, subjects in turn) into
/// `dir/items` and its configuration into `dir/glassbox.toml`; returns the configuration's path.
fn write_fixture(dir: &Path) -> Result<PathBuf> {
    let items = dir.join("items");
    std::fs::create_dir_all(&items)?;
    let mut rng = Rng(0x5eed_1e55_0dd5_c0de);
    for i in 0..ITEMS {
        let subject = &SUBJECTS[i % SUBJECTS.len()];
        let name = format!("{} {}", capitalize(subject.name), i / SUBJECTS.len() + 1);
        let description = fill("{A} and {b}", subject, &mut rng);
        let body: Vec<String> = (0..PARAGRAPHS)
            .map(|_| paragraph(subject, &mut rng))
            .collect();
        // JSON strings are YAML double-quoted scalars.
        let file = format!(
            "---\ntype: reference\nname: {}\ndescription: {}\ninclude: agent\n---\n{}\n",
            serde_json::to_string(&name)?,
            serde_json::to_string(&description)?,
            body.join("\n\n")
        );
        std::fs::write(items.join(format!("item-{i:03}.md")), file)?;
    }
    let config = dir.join("glassbox.toml");
    std::fs::write(
        &config,
        format!("[[agents]]\nname = \"{AGENT}\"\nitems = \"items\"\n"),
    )?;
    Ok(config)
}

/// `n` distinct messages of one to three sentences, each about one subject.
fn messages(seed: u64, n: usize) -> Vec<String> {
    let mut rng = Rng(seed);
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let subject = &SUBJECTS[rng.below(SUBJECTS.len())];
        let sentences: Vec<String> = (0..1 + rng.below(3))
            .map(|_| fill(QUESTIONS[rng.below(QUESTIONS.len())], subject, &mut rng))
            .collect();
        let text = sentences.join(" ");
        if seen.insert(text.clone()) {
            out.push(text);
        }
    }
    out
}

/// At least `n` drafts as a user types them: messages growing a word at a time (from two words).
fn typed_drafts(seed: u64, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n + 32);
    let mut batch = 0;
    while out.len() < n {
        batch += 1;
        for message in messages(seed.wrapping_add(batch), 4) {
            let words: Vec<&str> = message.split_whitespace().collect();
            out.extend((2..=words.len()).map(|k| words[..k].join(" ")));
        }
    }
    out
}

/// The text an item is indexed by, as `Items` builds it.
fn index_text(item: &Item) -> String {
    item_search::index_text(item.name(), &item.meta.description, Some(&item.text))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// The server, its agent as loaded, the chunks the server cuts its items into, and a session.
struct Bench {
    server: Server,
    agent: Arc<Agent>,
    /// Every item's chunk texts, in the agent's item order (the order `Items` embeds them in).
    chunks: Vec<String>,
    /// Chunks per item, in the same order.
    per_item: Vec<usize>,
    http: reqwest::Client,
    session_id: String,
    token: String,
    settings: SessionSettings,
}

impl Bench {
    /// Starts the server on the agent's configuration with the model in `model_dir`, waits for the
    /// model, and opens a session of the agent.
    async fn start(config: &Path, model_dir: &Path) -> Result<Self> {
        let (config, model_dir) = (
            config.display().to_string(),
            model_dir.display().to_string(),
        );
        let server = start_server(&[
            ("GLASSBOX_PROVIDER", "offline"),
            ("GLASSBOX_OFFLINE_DELAY_MS", "0"),
            ("GLASSBOX_EMBEDDINGS", "on"),
            ("GLASSBOX_EMBED_MODEL_DIR", &model_dir),
            ("GLASSBOX_CONFIG", &config),
            // No polling of the 100 files while timing (a reload would come with SIGHUP only).
            ("GLASSBOX_CONFIG_POLL_MS", "0"),
        ])
        .await?;
        let state = &server.state;
        let agent = state
            .agents
            .current()
            .pick(Some(AGENT))
            .cloned()
            .context("the generated agent is not configured")?;
        ensure!(
            agent.items.len() == ITEMS,
            "the agent has {} items",
            agent.items.len()
        );
        let mut chunks = Vec::new();
        let mut per_item = Vec::with_capacity(ITEMS);
        for item in &agent.items {
            let text = index_text(item);
            let cut = item_search::chunk(&text, MAX_CHUNK_CHARS);
            per_item.push(cut.len());
            chunks.extend(cut.into_iter().map(str::to_owned));
        }
        for _ in 0..600 {
            if state.embeddings.status() != EmbedStatus::Loading {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let status = state.embeddings.status();
        ensure!(
            matches!(status, EmbedStatus::Ready { .. }),
            "the embedding model is not ready: {status:?}"
        );
        let http = reqwest::Client::builder().tcp_nodelay(true).build()?;
        let created: Value = http
            .post(format!("http://{}/api/sessions", server.addr))
            .json(&json!({"agent": AGENT}))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let session_id = created["sessionId"]
            .as_str()
            .context("no sessionId")?
            .to_owned();
        let token = created["token"].as_str().context("no token")?.to_owned();
        let settings = state.store.settings(&session_id).await?;
        ensure!(
            settings.agent.as_deref() == Some(AGENT),
            "the session is not the agent's"
        );
        Ok(Self {
            server,
            agent,
            chunks,
            per_item,
            http,
            session_id,
            token,
            settings,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.addr)
    }

    /// A fresh `Items` over a new empty database, sharing the server's embedding service with
    /// the chunks' vectors forgotten from its memory: nothing of a previous pass is found. The
    /// database's folder goes with it.
    async fn fresh_items(&self) -> Result<(Items, tempfile::TempDir)> {
        let dir = tempfile::tempdir()?;
        let store = Store::open(dir.path()).await?;
        let state = &self.server.state;
        let keys: Vec<String> = self.chunks.iter().map(|c| chunk_key(c)).collect();
        state.embeddings.forget(&keys);
        let items = Items::new(
            state.agents.clone(),
            store,
            state.embeddings.clone(),
            state.limits.clone(),
            AgentSettings::default(),
            state.tools.clone(),
            std::sync::Arc::new(|text: &str| text.split_whitespace().count() as u32),
        );
        Ok((items, dir))
    }

    /// Forgets the vectors of `message`'s sentences, so the next search embeds them.
    fn forget_message(&self, message: &str) {
        let keys: Vec<String> = item_search::query_chunks(message, MAX_CHUNK_CHARS)
            .into_iter()
            .map(query_key)
            .collect();
        self.server.state.embeddings.forget(&keys);
    }

    /// One cold request context through `items`: every chunk embedded (checked with the
    /// service's count), and the message's sentence. Its duration in seconds.
    async fn cold_pass(&self, items: &Items) -> Result<f64> {
        let embeddings = &self.server.state.embeddings;
        self.forget_message(COLD_MESSAGE);
        let before = embeddings.computed();
        let t = Instant::now();
        let found = items.request_context(&self.settings, COLD_MESSAGE).await;
        let secs = t.elapsed().as_secs_f64();
        ensure!(
            found.status == SearchStatus::Done,
            "the search did not run: {:?}",
            found.status
        );
        let sentences = item_search::query_chunks(COLD_MESSAGE, MAX_CHUNK_CHARS).len();
        let expected = (self.chunks.len() + sentences) as u64;
        let computed = embeddings.computed() - before;
        ensure!(
            computed == expected,
            "{computed} texts embedded, not {expected}: a cache answered"
        );
        Ok(secs)
    }

    /// `POST /api/chat` (JSON answer, waiting for the reply) in the session.
    async fn chat(&self, message: &str) -> Result<()> {
        let answer: Value = self
            .http
            .post(self.url("/api/chat"))
            .bearer_auth(&self.token)
            .json(&json!({"sessionId": self.session_id, "message": message}))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        ensure!(
            answer["reply"]["status"] == "complete",
            "the reply did not complete: {answer}"
        );
        Ok(())
    }

    /// `POST /api/sessions/{id}/preview` of `draft`, read to the end: its round trip (ms).
    async fn preview(&self, draft: &str) -> Result<f64> {
        let url = self.url(&format!("/api/sessions/{}/preview", self.session_id));
        let t = Instant::now();
        let response = self
            .http
            .post(url)
            .bearer_auth(&self.token)
            .json(&json!({"message": draft}))
            .send()
            .await?;
        let status = response.status();
        let body = response.bytes().await?;
        let elapsed = ms(t.elapsed());
        ensure!(
            status.is_success(),
            "preview answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
        Ok(elapsed)
    }

    /// `GET /healthz`, read to the end: its round trip (ms).
    async fn healthz(&self) -> Result<f64> {
        let t = Instant::now();
        let response = self.http.get(self.url("/healthz")).send().await?;
        let status = response.status();
        let body = response.bytes().await?;
        let elapsed = ms(t.elapsed());
        ensure!(status.is_success(), "healthz answered {status}");
        black_box(body);
        Ok(elapsed)
    }
}

/// The section: the fixture, the server, then cold indexing, the warm request context and the
/// preview round trip, one table each.
pub async fn items(args: &ItemsBenchArgs) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let config = write_fixture(dir.path())?;
    // onnxruntime loads while the server's model does.
    let mut anchor = OrtAnchor::start(&args.python, &args.script, &args.model_dir, None)?;
    let bench = Bench::start(&config, &args.model_dir).await?;
    let texts = dir.path().join("chunks.jsonl");
    let lines: Vec<String> = bench
        .chunks
        .iter()
        .map(serde_json::to_string)
        .collect::<Result<_, _>>()?;
    std::fs::write(&texts, lines.join("\n") + "\n")?;
    let chars: usize = bench.chunks.iter().map(|c| c.chars().count()).sum();
    let distinct: HashSet<&String> = bench.chunks.iter().collect();
    println!(
        "\n## Agents' items: {} references of one agent, {} chunks ({}–{} per item, {} distinct, {:.0} characters on average)\n",
        bench.agent.items.len(),
        bench.chunks.len(),
        bench.per_item.iter().min().unwrap_or(&0),
        bench.per_item.iter().max().unwrap_or(&0),
        distinct.len(),
        chars as f64 / bench.chunks.len().max(1) as f64,
    );
    println!(
        "Generated over {} subjects (`include: agent`, chunked by `item_search::chunk(index_text, {MAX_CHUNK_CHARS})` as the server does); \
         a real server in this process with all-MiniLM-L6-v2 and the offline provider; the agent's default search settings.",
        SUBJECTS.len()
    );
    cold_indexing(&bench, &mut anchor, &texts).await?;
    drop(anchor);
    let messages = messages(0x0bad_5eed_cafe_f00d, MESSAGES);
    warm_request_context(&bench, &messages).await?;
    preview_round_trip(&bench, &messages).await
}

/// Cold indexing: the server's first request context (its `Items` indexes every chunk: chunked,
/// hashed, looked up in memory and the database, embedded, stored), then `INDEX_PASSES` more
/// through fresh `Items` on empty caches; each of ours followed by an onnxruntime pass over the
/// same chunk texts.
async fn cold_indexing(bench: &Bench, anchor: &mut OrtAnchor, texts: &Path) -> Result<()> {
    let version = anchor.version()?;
    let chunks = bench.chunks.len() as f64;
    let command = format!("texts {} {ORT_BATCH}", texts.display());
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let mut first = f64::NAN;
    for round in 0..=INDEX_PASSES {
        if round == 0 {
            first = bench.cold_pass(&bench.server.state.items).await?;
        } else {
            let (items, _db) = bench.fresh_items().await?;
            ours.push(chunks / bench.cold_pass(&items).await?);
        }
        let answer = tokio::task::block_in_place(|| anchor.ask(&command))?;
        ensure!(
            answer["count"].as_u64() == Some(bench.chunks.len() as u64),
            "onnxruntime embedded other texts: {answer}"
        );
        if round > 0 {
            theirs.push(answer["per_s"].as_f64().unwrap_or(f64::NAN));
        }
    }
    let (ours, theirs) = (sorted(ours), sorted(theirs));
    let (us, them) = (percentile(&ours, 0.5), percentile(&theirs, 0.5));
    println!(
        "\n### Cold indexing of the {} chunks (no goal: beside onnxruntime, same chunks, same run)\n",
        bench.chunks.len()
    );
    println!("| | Glassbox | onnxruntime {version} (Python, 2 threads) | ratio (ours / ort) |");
    println!("|---|---|---|---|");
    println!(
        "| chunks/s, median of {INDEX_PASSES} passes each, alternating (range) | {us:.1} ({:.1}–{:.1}) | {them:.1} ({:.1}–{:.1}) | {:.2} |",
        ours[0],
        ours[ours.len() - 1],
        theirs[0],
        theirs[theirs.len() - 1],
        us / them
    );
    println!(
        "| the server's first request context, empty cache: s (chunks/s) | {first:.2} ({:.1}) | — | — |",
        chunks / first
    );
    println!(
        "\nOurs: `Items::request_context` of a one-sentence message with nothing indexed: each item's index text \
         chunked and hashed, the chunks looked up in memory and SQLite, embedded by the server's embedding \
         service (requests of ≤ 128 texts, sorted by length, runs of 32, the server's 2 threads) and stored, \
         then the sentence embedded and the search run. The first row is the server's own `Items` (the first \
         pass, not in the median: the model's first runs); the passes of the median each use a fresh `Items` \
         over a new empty database, the chunks' vectors and the sentence's forgotten from the service's memory \
         (every chunk was embedded: checked by the service's count). onnxruntime: the same chunk texts, \
         tokenized and embedded (mean pooling, normalized) in the same requests of 128 sorted by length, \
         batches of {ORT_BATCH}; its first pass, before ours started alternating, is a warm-up and not counted."
    );
    Ok(())
}

/// The vectors of the agent's chunks by item (from the service's memory: nothing is computed).
async fn chunk_vectors(bench: &Bench) -> Result<Vec<Vec<Arc<[f32]>>>> {
    let state = &bench.server.state;
    let before = state.embeddings.computed();
    let pairs: Vec<(String, String)> = bench
        .chunks
        .iter()
        .map(|c| (chunk_key(c), c.clone()))
        .collect();
    let mut flat = Vec::with_capacity(pairs.len());
    for part in pairs.chunks(glassbox_server::embed::service::MAX_INPUTS) {
        flat.extend(
            state
                .embeddings
                .embed_cached(&state.store, part.to_vec())
                .await?,
        );
    }
    ensure!(
        state.embeddings.computed() == before,
        "the chunks' vectors were not cached"
    );
    let mut flat = flat.into_iter();
    Ok(bench
        .per_item
        .iter()
        .map(|&n| flat.by_ref().take(n).collect())
        .collect())
}

/// The warm request context: every item indexed; each message's first call (its sentences
/// embedded), then `WARM_CALLS` calls over the messages (their sentences remembered, as the
/// server keeps them); and, on the same vectors, the search alone and the hashing of the items'
/// index texts each call does.
async fn warm_request_context(bench: &Bench, messages: &[String]) -> Result<()> {
    let state = &bench.server.state;
    let mut first = Vec::with_capacity(messages.len());
    for message in messages {
        bench.forget_message(message);
        let t = Instant::now();
        let found = state.items.request_context(&bench.settings, message).await;
        first.push(ms(t.elapsed()));
        ensure!(
            found.status == SearchStatus::Done,
            "search: {:?}",
            found.status
        );
    }
    let before = state.embeddings.computed();
    let mut warm = Vec::with_capacity(WARM_CALLS);
    let mut chosen = 0;
    for i in 0..WARM_CALLS {
        let message = &messages[i % messages.len()];
        let t = Instant::now();
        let found = state.items.request_context(&bench.settings, message).await;
        warm.push(ms(t.elapsed()));
        chosen += found.items.len();
    }
    ensure!(
        state.embeddings.computed() == before,
        "a warm call embedded something"
    );

    // The search alone: the same candidates (every item: none is in the session), vectors and
    // settings.
    let vectors = chunk_vectors(bench).await?;
    let candidates: Vec<Candidate<Arc<[f32]>>> = bench
        .agent
        .items
        .iter()
        .zip(&vectors)
        .map(|(item, chunks)| Candidate {
            item: &item.meta.item,
            priority: item.meta.priority,
            chunks,
        })
        .collect();
    let mut queries = Vec::with_capacity(messages.len());
    for message in messages {
        let pairs = item_search::query_chunks(message, MAX_CHUNK_CHARS)
            .into_iter()
            .map(|q| (query_key(q), q.to_owned()))
            .collect();
        queries.push(state.embeddings.embed_remembered(pairs).await?);
    }
    let settings = state.items.effective(&bench.settings).search();
    let mut search = Vec::with_capacity(WARM_CALLS);
    for i in 0..WARM_CALLS {
        let query = &queries[i % queries.len()];
        let t = Instant::now();
        black_box(item_search::search(
            query,
            &candidates,
            &settings,
            NEAR_MISSES,
        ));
        search.push(ms(t.elapsed()));
    }
    // What each call does to find the items' vectors: their index texts built and hashed.
    let mut hashing = Vec::with_capacity(WARM_CALLS);
    for _ in 0..WARM_CALLS {
        let t = Instant::now();
        for item in &bench.agent.items {
            black_box(content_hash(&index_text(item)));
        }
        hashing.push(ms(t.elapsed()));
    }

    let (warm, first, search, hashing) =
        (sorted(warm), sorted(first), sorted(search), sorted(hashing));
    let p50 = percentile(&warm, 0.5);
    println!(
        "\n### Request context with everything indexed: {} items / {} chunks, {} messages of 1–3 sentences (goal ≤ {CONTEXT_GOAL_MS} ms p50)\n",
        bench.agent.items.len(),
        bench.chunks.len(),
        messages.len()
    );
    println!("| | p50 (ms) | p99 (ms) | p50 / goal |");
    println!("|---|---|---|---|");
    println!(
        "| `Items::request_context`, the message's sentences remembered ({WARM_CALLS} calls) | {p50:.3} | {:.3} | {:.2} |",
        percentile(&warm, 0.99),
        p50 / CONTEXT_GOAL_MS
    );
    println!(
        "| the same, each message's first call: its sentences embedded now ({} calls) | {:.3} | {:.3} | {:.2} |",
        first.len(),
        percentile(&first, 0.5),
        percentile(&first, 0.99),
        percentile(&first, 0.5) / CONTEXT_GOAL_MS
    );
    println!(
        "| in a call: core `item_search::search` alone, same vectors and settings ({WARM_CALLS} runs) | {:.3} | {:.3} | — |",
        percentile(&search, 0.5),
        percentile(&search, 0.99)
    );
    println!(
        "| in a call: the {} items' index texts built and hashed (SHA-256) to find their vectors ({WARM_CALLS} runs) | {:.3} | {:.3} | — |",
        bench.agent.items.len(),
        percentile(&hashing, 0.5),
        percentile(&hashing, 0.99)
    );
    println!(
        "\nAnchor: ~{ANCHOR_MS} ms per 100 documents (docs/item-selection.md); the remembered p50 here is {p50:.3} ms, \
         {:.2}× that. Each warm call chose {:.1} items on average (top-N {}, floor {}). The warm calls run \
         the messages in turn; the rows \"in a call\" are parts of the first row, timed apart.",
        p50 / ANCHOR_MS,
        chosen as f64 / WARM_CALLS as f64,
        settings.top_n,
        settings.min_score
    );
    Ok(())
}

/// The preview round trip over loopback HTTP in a session of the agent with `HISTORY_CHATS`
/// exchanges: drafts whose sentences are remembered (the `messages`, previewed once before),
/// drafts as typed (a word more each time), and `GET /healthz` as the floor, interleaved.
async fn preview_round_trip(bench: &Bench, messages: &[String]) -> Result<()> {
    let state = &bench.server.state;
    for message in self::messages(0x1234_5678_9abc_def1, HISTORY_CHATS) {
        bench.chat(&message).await?;
    }
    let stored = state.store.messages(&bench.session_id).await?.len();
    ensure!(
        stored == 2 * HISTORY_CHATS,
        "the session holds {stored} messages"
    );
    // Token counts of the items the messages bring, cached by text as on a live server.
    for message in messages {
        bench.preview(message).await?;
    }
    let typed = typed_drafts(0x7e57_ab1e_d00d_5eed, PREVIEW_WARMUP + PREVIEWS);
    let before = state.embeddings.computed();
    let (mut floor, mut remembered, mut typing) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..PREVIEW_WARMUP + PREVIEWS {
        let h = bench.healthz().await?;
        let r = bench.preview(&messages[i % messages.len()]).await?;
        let t = bench.preview(&typed[i]).await?;
        if i >= PREVIEW_WARMUP {
            floor.push(h);
            remembered.push(r);
            typing.push(t);
        }
    }
    let embedded = state.embeddings.computed() - before;
    let (floor, remembered, typing) = (sorted(floor), sorted(remembered), sorted(typing));
    let base = percentile(&floor, 0.5);
    println!(
        "\n### Preview round trip: `POST /api/sessions/{{id}}/preview` over loopback HTTP (reqwest, keep-alive), a session of {} messages, {PREVIEWS} each, interleaved (goal ≤ {PREVIEW_GOAL_MS} ms p50)\n",
        2 * HISTORY_CHATS
    );
    println!("| | p50 (ms) | p99 (ms) | p50 / healthz | p50 / goal |");
    println!("|---|---|---|---|---|");
    println!(
        "| `GET /healthz` (the HTTP floor) | {base:.3} | {:.3} | 1.00 | — |",
        percentile(&floor, 0.99)
    );
    for (name, times) in [
        (
            "preview of a draft whose sentences are remembered",
            &remembered,
        ),
        (
            "preview of a draft as it is typed (a word more each time)",
            &typing,
        ),
    ] {
        let p50 = percentile(times, 0.5);
        println!(
            "| {name} | {p50:.3} | {:.3} | {:.2} | {:.2} |",
            percentile(times, 0.99),
            p50 / base,
            p50 / PREVIEW_GOAL_MS
        );
    }
    println!(
        "\nA preview reads the session's messages, searches the agent's items with the draft (its sentences' \
         vectors from memory, else embedded now), and plans the turn as a reply would (token counts, receipt), \
         nothing stored or sent. The typed drafts are messages like the warm section's growing a word at a \
         time (from two words): {embedded} sentences were embedded during the {} timed and warm-up rounds (the \
         sentence being typed, when no earlier draft had it; finished ones are remembered). The remembered \
         drafts are the warm section's {} messages, each previewed once before.",
        PREVIEW_WARMUP + PREVIEWS,
        messages.len()
    );
    Ok(())
}
