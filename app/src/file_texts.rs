//! The texts of the conversation's text files, for the token meter: each is fetched once from the
//! session (`GET /api/sessions/{id}/files/{fileId}`) and counted by the same tokenizer as the rest,
//! so the meter counts a text file as the request carries it. Images need no bytes: they are priced
//! by their pixels.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use glassbox_core::attachments::{FileContent, FileContents, IMAGE_TYPES, priced_images};
use glassbox_core::vocab::Attachment;
use leptos::prelude::*;

use crate::attach::fetch_text;
use crate::client::ChatClient;

/// Text files' texts by attachment id, filled in as they arrive.
#[derive(Clone, Copy)]
pub struct FileTexts {
    texts: RwSignal<HashMap<String, Arc<str>>>,
    asked: StoredValue<HashSet<String>>,
    client: ChatClient,
}

impl FileTexts {
    pub fn new(client: ChatClient) -> Self {
        Self {
            texts: RwSignal::new(HashMap::new()),
            asked: StoredValue::new(HashSet::new()),
            client,
        }
    }

    /// What the meter knows of `files` (the ones that go, `files_to_send`): images priced by
    /// their size, text files by their text once fetched (until then, by their metadata). Asks
    /// for the texts not fetched yet.
    pub fn contents(&self, files: &[&Attachment]) -> FileContents {
        let mut out = priced_images(files);
        let text_ids = files.iter().filter_map(|a| {
            let image = a
                .mime_type
                .as_deref()
                .is_some_and(|m| IMAGE_TYPES.contains(&m));
            a.id.as_deref().filter(|_| !image)
        });
        let missing: Vec<&str> = self.texts.with(|texts| {
            text_ids
                .filter(|id| match texts.get(*id) {
                    Some(text) => {
                        out.insert((*id).to_owned(), FileContent::Text(text.clone()));
                        false
                    }
                    None => true,
                })
                .collect()
        });
        for id in missing {
            self.fetch(id);
        }
        out
    }

    /// Fetches one file's text, once (a failure is not asked again: the file counts as its
    /// metadata).
    fn fetch(&self, id: &str) {
        // Not joined (a reconnect): asked again once it is.
        if self.client.session().is_none() {
            return;
        }
        let fresh = self.asked.try_update_value(|a| a.insert(id.to_owned()));
        if fresh != Some(true) {
            return;
        }
        let (client, texts, id) = (self.client, self.texts, id.to_owned());
        leptos::task::spawn_local(async move {
            if let Some(text) = fetch_text(client, &id).await {
                let _ = texts.try_update(|t| t.insert(id, Arc::from(text)));
            }
        });
    }
}
