//! Files the user attaches (picker, drop, paste): each is checked as the server checks it
//! (`core::attachments`), uploaded at once to the session (`POST /api/sessions/{id}/files`), and
//! sent with the next message by id. A refused file is never uploaded and its reason is shown.

use glassbox_core::ErrorCode;
use glassbox_core::attachments::{FileError, FileKind, IMAGE_TYPES, check_size, classify};
use glassbox_core::limits::MAX_ATTACHMENTS;
use glassbox_core::vocab::Attachment;
use glassbox_core::wire::WireError;
use leptos::prelude::*;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::client::ChatClient;
use crate::session_store;
use crate::words::{Word, Words, words};

/// Where one attached file is.
#[derive(Debug, Clone, PartialEq)]
pub enum Upload {
    /// Being uploaded.
    Sending,
    /// Stored by the server: the attachment the message will carry.
    Ready(Attachment),
}

/// A file in the composer, not sent yet.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingFile {
    pub key: u32,
    pub name: String,
    pub size: u64,
    pub kind: FileKind,
    pub upload: Upload,
}

/// The composer's attached files and the reasons the last ones were refused.
#[derive(Clone, Copy)]
pub struct Attaching {
    pub files: RwSignal<Vec<PendingFile>>,
    /// One line per refused file (replaced by the next attempt).
    pub problems: RwSignal<Vec<String>>,
    next: StoredValue<u32>,
    /// Files being checked (the uploader's code on its way): the message waits for them.
    checking: RwSignal<u32>,
    client: ChatClient,
    words: Words,
}

impl Attaching {
    pub fn new(client: ChatClient) -> Self {
        let files = RwSignal::new(Vec::<PendingFile>::new());
        let problems = RwSignal::new(Vec::new());
        // A new conversation (New chat, a deleted or refused session) starts with no files: the
        // old ones belong to the old session.
        let session_id = Memo::new(move |_| client.transcript.with(|t| t.session_id.clone()));
        Effect::new(move |was: Option<Option<String>>| {
            let now = session_id.get();
            if was.is_some_and(|was| was.is_some() && was != now) {
                files.set(Vec::new());
                problems.set(Vec::new());
            }
            now
        });
        // The uploaded ones go with the draft's preview.
        Effect::new(move |_| {
            let ready: Vec<Attachment> = files.with(|f| {
                f.iter()
                    .filter_map(|p| match &p.upload {
                        Upload::Ready(a) => Some(a.clone()),
                        Upload::Sending => None,
                    })
                    .collect()
            });
            client.draft_files.set(ready);
        });
        let this = Self {
            files,
            problems,
            next: StoredValue::new(0),
            checking: RwSignal::new(0),
            client,
            words: words(),
        };
        this.keep_across_reloads(session_id);
        this
    }

    /// The uploaded files of the unsent draft are kept for this tab, as its text is: a reload or
    /// a re-created element gets them back once it has joined the session they belong to.
    fn keep_across_reloads(self, session_id: Memo<Option<String>>) {
        let restored = StoredValue::new(false);
        Effect::new(move |_| {
            let ready = self.client.draft_files.get();
            let (Some(sid), Some(config)) = (session_id.get(), self.client.config()) else {
                return;
            };
            if !restored.get_value() {
                restored.set_value(true);
                if let Some((owner, kept)) =
                    session_store::load_draft_files(&config.server, &config.slot())
                    && owner == sid
                    && ready.is_empty()
                    && !kept.is_empty()
                {
                    let first = self.next.get_value();
                    self.next.set_value(first + kept.len() as u32);
                    let pending = kept.into_iter().zip(first..).map(|(a, key)| PendingFile {
                        key,
                        name: a.name.clone(),
                        size: a.size.unwrap_or(0),
                        kind: match a.mime_type.as_deref() {
                            Some(m) if IMAGE_TYPES.contains(&m) => FileKind::Image,
                            _ => FileKind::Text,
                        },
                        upload: Upload::Ready(a),
                    });
                    // Saved again by this effect once `draft_files` follows.
                    self.files.set(pending.collect());
                    return;
                }
            }
            session_store::save_draft_files(&config.server, &config.slot(), &sid, &ready);
        });
    }

    /// Attaches the files of a picker, a drop or a paste (checked once the uploader's code is
    /// there: usually at once, fetched when the composer got the focus).
    pub fn add_list(&self, list: Option<web_sys::FileList>) {
        let Some(list) = list else { return };
        let files: Vec<web_sys::File> = (0..list.length()).filter_map(|i| list.get(i)).collect();
        if files.is_empty() {
            return;
        }
        let this = *self;
        self.checking.update(|n| *n += 1);
        leptos::task::spawn_local(async move {
            let uploader = load_uploader().await;
            // The chat was removed meanwhile: nothing to attach to.
            if this.files.is_disposed() {
                return;
            }
            let problems: Vec<String> = untrack(|| match uploader {
                Ok(uploader) => files
                    .into_iter()
                    .filter_map(|f| this.add(uploader, f).err())
                    .collect(),
                Err(_) => files
                    .iter()
                    .map(|f| {
                        this.words
                            .fill(Word::UploadNotStarted, &[("name", &f.name())])
                    })
                    .collect(),
            });
            this.problems.set(problems);
            this.checking.update(|n| *n = n.saturating_sub(1));
        });
    }

    /// Checks one file and starts its upload.
    fn add(&self, uploader: Uploader, file: web_sys::File) -> Result<(), String> {
        let name = file.name();
        let declared = file.type_();
        let size = file.size() as u64;
        let kind = (uploader.check)(&name, &declared, size).map_err(|e| e.message)?;
        if self.files.with_untracked(Vec::len) >= MAX_ATTACHMENTS {
            let max = MAX_ATTACHMENTS.to_string();
            return Err(self
                .words
                .fill(Word::TooManyFiles, &[("name", &name), ("max", &max)]));
        }
        let (config, session) = session_of(self.client, &name).map_err(|_| {
            self.words
                .fill(Word::AttachNotConnected, &[("name", &name)])
        })?;
        let key = self.next.get_value();
        self.next.set_value(key + 1);
        self.files.update(|f| {
            f.push(PendingFile {
                key,
                name: name.clone(),
                size,
                kind,
                upload: Upload::Sending,
            })
        });
        let this = *self;
        leptos::task::spawn_local(async move {
            let result = (uploader.start)(
                config.server.clone(),
                session.clone(),
                file,
                name.clone(),
                declared,
            )
            .await;
            match result {
                // Finished for a conversation that is no longer this one (a reconnect to the same
                // one keeps it): dropped, and the server forgets it.
                Ok(attachment)
                    if this
                        .client
                        .transcript
                        .with_untracked(|t| t.session_id.clone())
                        != Some(session.session_id.clone()) =>
                {
                    let _ = this.files.try_update(|f| f.retain(|p| p.key != key));
                    forget(&config.server, &session, &attachment);
                }
                Ok(attachment) => {
                    let kept = this.files.try_update(|f| {
                        f.iter_mut().find(|p| p.key == key).map(|p| {
                            p.upload = Upload::Ready(attachment.clone());
                        })
                    });
                    // Removed while it was uploading: the server need not keep it.
                    if kept.flatten().is_none() {
                        forget(&config.server, &session, &attachment);
                    }
                }
                Err(why) => {
                    let _ = this.files.try_update(|f| f.retain(|p| p.key != key));
                    let _ = this.problems.try_update(|p| p.push(why.message));
                }
            }
        });
        Ok(())
    }

    /// Takes a file off the message (the server forgets an uploaded one).
    pub fn remove(&self, key: u32) {
        let mut removed = None;
        self.files.update(|f| {
            if let Some(i) = f.iter().position(|p| p.key == key) {
                removed = Some(f.remove(i));
            }
        });
        if let Some(PendingFile {
            upload: Upload::Ready(a),
            ..
        }) = removed
            && let Some(config) = self.client.config()
            && let Some(session) = self.client.last_session()
        {
            forget(&config.server, &session, &a);
        }
    }

    /// True while a file is uploading (the message waits for it).
    pub fn busy(&self) -> bool {
        self.checking.get() > 0
            || self
                .files
                .with(|f| f.iter().any(|p| p.upload == Upload::Sending))
    }

    /// True when a file is ready to go.
    pub fn any_ready(&self) -> bool {
        self.files
            .with(|f| f.iter().any(|p| matches!(p.upload, Upload::Ready(_))))
    }

    /// The uploaded files, for the message being sent; the composer is emptied of them.
    pub fn take(&self) -> Vec<Attachment> {
        let mut out = Vec::new();
        self.files.update(|f| {
            f.retain(|p| match &p.upload {
                Upload::Ready(a) => {
                    out.push(a.clone());
                    false
                }
                Upload::Sending => true,
            })
        });
        self.problems.set(Vec::new());
        // At once, so no preview asks for a draft carrying the files just sent.
        self.client.draft_files.set(Vec::new());
        out
    }
}

/// Checks a file for upload as the server will: its kind. In the uploader's chunk: the checks'
/// code and words are needed only once a file is attached.
fn check(name: &str, declared: &str, size: u64) -> Result<FileKind, WireError> {
    let refused = |e: FileError| WireError::new(e.code(), e.to_string());
    let (kind, _) = classify(name, declared).map_err(refused)?;
    check_size(name, kind, size).map_err(refused)?;
    Ok(kind)
}

/// The client's configuration and its session, which uploads go to.
fn session_of(
    client: ChatClient,
    name: &str,
) -> Result<(crate::config::WidgetConfig, session_store::StoredSession), WireError> {
    let config = client
        .config()
        .ok_or_else(|| WireError::new(ErrorCode::Conflict, "the chat was removed"))?;
    let session = client.session().ok_or_else(|| {
        WireError::new(
            ErrorCode::Conflict,
            format!("{name}: not connected yet; attach it again in a moment"),
        )
    })?;
    Ok((config, session))
}

/// The host's `uploadFile(file)`: checks the file and uploads it to the client's session; the
/// attachment to pass to `sendMessage`.
pub async fn upload_file(client: ChatClient, file: web_sys::File) -> Result<Attachment, WireError> {
    let name = file.name();
    let declared = file.type_();
    let uploader = load_uploader().await.map_err(|_| {
        WireError::new(
            ErrorCode::Internal,
            format!("{name}: the upload could not start (this part of the chat did not load); attach it again"),
        )
    })?;
    (uploader.check)(&name, &declared, file.size() as u64)?;
    let (config, session) = session_of(client, &name)?;
    (uploader.start)(config.server, session, file, name, declared).await
}

/// An upload under way, as the chunk's function returns it.
type Uploading =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Attachment, WireError>>>>;

/// The uploader's code, handed out by its chunk.
#[derive(Clone, Copy)]
pub struct Uploader {
    /// Checks a file as the server will ([`check`]).
    check: fn(&str, &str, u64) -> Result<FileKind, WireError>,
    /// Uploads a file (server, session, file, its name, its declared type).
    start: fn(String, session_store::StoredSession, web_sys::File, String, String) -> Uploading,
}

crate::chunks::split_fn! {
    /// The upload's code: a chunk of its own with the `split` feature, fetched when the composer
    /// gets the focus or a file is first attached.
    load_uploader / preload_uploader () -> Uploader => Uploader { check, start: start_upload }
}

/// [`upload`] with owned arguments, boxed: the function the chunk hands out.
fn start_upload(
    server: String,
    session: session_store::StoredSession,
    file: web_sys::File,
    name: String,
    declared: String,
) -> Uploading {
    Box::pin(async move { upload(&server, &session, &file, &name, &declared).await })
}

/// The file's URL on the server, `…/files` for an upload.
fn files_url(server: &str, session: &session_store::StoredSession, id: Option<&str>) -> String {
    let base = format!(
        "{}/api/sessions/{}/files",
        server.trim_end_matches('/'),
        String::from(js_sys::encode_uri_component(&session.session_id))
    );
    match id {
        Some(id) => format!("{base}/{}", String::from(js_sys::encode_uri_component(id))),
        None => base,
    }
}

/// A request to the session's files: with its token, else as its verified user (the id
/// percent-encoded: a header carries only a few characters as they are).
fn request(
    method: &str,
    session: &session_store::StoredSession,
    content_type: Option<&str>,
) -> Result<web_sys::RequestInit, JsValue> {
    let headers = web_sys::Headers::new()?;
    if !session.token.is_empty() {
        headers.set("Authorization", &format!("Bearer {}", session.token))?;
    } else if let Some(user) = &session.user {
        let id = String::from(js_sys::encode_uri_component(&user.id));
        headers.set("X-Glassbox-User", &id)?;
        headers.set("X-Glassbox-User-Hash", &user.hash)?;
    }
    if let Some(t) = content_type {
        headers.set("Content-Type", t)?;
    }
    let init = web_sys::RequestInit::new();
    init.set_method(method);
    init.set_headers(&headers);
    Ok(init)
}

/// Uploads one file; the server's attachment, or why not in words that name the file.
async fn upload(
    server: &str,
    session: &session_store::StoredSession,
    file: &web_sys::File,
    name: &str,
    declared: &str,
) -> Result<Attachment, WireError> {
    let url = format!(
        "{}?name={}",
        files_url(server, session, None),
        String::from(js_sys::encode_uri_component(name))
    );
    let content_type = if declared.is_empty() {
        "application/octet-stream"
    } else {
        declared
    };
    let failed = |_| {
        WireError::new(
            ErrorCode::Internal,
            format!("{name}: the upload failed; check the connection and attach it again"),
        )
    };
    let init = request("POST", session, Some(content_type)).map_err(failed)?;
    init.set_body(file);
    let window = web_sys::window().ok_or_else(|| failed(JsValue::NULL))?;
    let response: web_sys::Response = JsFuture::from(window.fetch_with_str_and_init(&url, &init))
        .await
        .and_then(|r| r.dyn_into())
        .map_err(failed)?;
    let text = match response.text() {
        Ok(p) => JsFuture::from(p).await.map_err(failed)?.as_string(),
        Err(e) => return Err(failed(e)),
    }
    .unwrap_or_default();
    if response.ok() {
        return serde_json::from_str(&text).map_err(|e| {
            WireError::new(
                ErrorCode::Internal,
                format!("{name}: the server's answer was not read: {e}"),
            )
        });
    }
    #[derive(serde::Deserialize)]
    struct Refusal {
        error: WireError,
    }
    Err(match serde_json::from_str::<Refusal>(&text) {
        // Named, unless the server's words name it already.
        Ok(r) if r.error.message.starts_with(name) => r.error,
        Ok(r) => WireError {
            message: format!("{name}: {}", r.error.message),
            ..r.error
        },
        Err(_) => WireError::new(
            ErrorCode::Internal,
            format!("{name}: the server answered {}", response.status()),
        ),
    })
}

/// The text of one of the session's files (`None` when it cannot be had: the meter then counts
/// the file as its metadata).
pub async fn fetch_text(client: ChatClient, id: &str) -> Option<String> {
    let config = client.config()?;
    let session = client.session()?;
    let init = request("GET", &session, None).ok()?;
    let url = files_url(&config.server, &session, Some(id));
    let window = web_sys::window()?;
    let response: web_sys::Response = JsFuture::from(window.fetch_with_str_and_init(&url, &init))
        .await
        .ok()?
        .dyn_into()
        .ok()?;
    if !response.ok() {
        return None;
    }
    JsFuture::from(response.text().ok()?)
        .await
        .ok()?
        .as_string()
}

/// Asks the server to delete an uploaded file nobody will send (best effort).
fn forget(server: &str, session: &session_store::StoredSession, a: &Attachment) {
    let Some(id) = a.id.as_deref() else { return };
    let url = files_url(server, session, Some(id));
    if let (Some(window), Ok(init)) = (web_sys::window(), request("DELETE", session, None)) {
        let _ = window.fetch_with_str_and_init(&url, &init);
    }
}
