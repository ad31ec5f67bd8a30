//! Files users attach: an upload is checked (kind, size, and that its bytes are what its type
//! says), stored within the session's limit, and named by id in the message that carries it. A
//! turn gathers the contents of its history's files: images as base64, text files as text.

use std::sync::Arc;

use base64::Engine as _;
use glassbox_core::attachments::{
    FileContent, FileContents, FileError, FileKind, check_size, classify,
};
use glassbox_core::wire::{Attachment, ChatMessage};
use thiserror::Error;

use crate::ids::{new_id, now_ms};
use crate::storage::{FileStored, NewFile, StorageError, Store};
use crate::wire_error::ToWire;

/// Why a file or a message's attachments were refused.
#[derive(Debug, Error)]
pub enum FilesError {
    #[error(transparent)]
    Refused(#[from] FileError),
    #[error("attachment {0:?} is not a file of this session")]
    Unknown(String),
    #[error("storage failed")]
    Storage(#[from] StorageError),
}

impl ToWire for FilesError {
    fn code(&self) -> glassbox_core::ErrorCode {
        match self {
            FilesError::Refused(e) => e.code(),
            FilesError::Unknown(_) => glassbox_core::ErrorCode::InvalidAttachment,
            FilesError::Storage(e) => e.code(),
        }
    }
}

/// The session's files.
#[derive(Debug, Clone)]
pub struct Files {
    store: Store,
}

impl Files {
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// Checks and stores an uploaded file; answers the attachment a message carries for it.
    pub async fn upload(
        &self,
        session_id: &str,
        name: &str,
        declared_type: &str,
        bytes: &[u8],
    ) -> Result<Attachment, FilesError> {
        let (kind, mime) = classify(name, declared_type)?;
        check_size(name, kind, bytes.len() as u64)?;
        let dimensions = check_bytes(name, kind, &mime, bytes)?;
        let id = new_id();
        let stored = self
            .store
            .insert_file(&NewFile {
                id: &id,
                session_id,
                name,
                mime_type: &mime,
                kind,
                dimensions,
                bytes,
                created_at: now_ms(),
            })
            .await?;
        if let FileStored::SessionFull { used } = stored {
            return Err(FileError::SessionFull {
                name: name.to_owned(),
                used,
            }
            .into());
        }
        Ok(Attachment {
            id: Some(id),
            name: name.to_owned(),
            mime_type: Some(mime),
            size: Some(bytes.len() as u64),
            url: None,
            width: dimensions.map(|(w, _)| w),
            height: dimensions.map(|(_, h)| h),
        })
    }

    /// A message's attachments as stored: each uploaded one described by the server's record (not
    /// the client's words); one that is not a file of this session is refused.
    pub async fn resolve(
        &self,
        session_id: &str,
        list: Vec<Attachment>,
    ) -> Result<Vec<Attachment>, FilesError> {
        let ids: Vec<&str> = list.iter().filter_map(|a| a.id.as_deref()).collect();
        if ids.is_empty() {
            return Ok(list);
        }
        let rows = self.store.files(session_id, &ids).await?;
        list.iter()
            .map(|a| match &a.id {
                None => Ok(a.clone()),
                Some(id) => rows
                    .iter()
                    .find(|r| &r.id == id)
                    .map(|r| r.attachment())
                    .ok_or_else(|| FilesError::Unknown(id.clone())),
            })
            .collect()
    }

    /// One file's description and bytes, if the session has it.
    pub async fn get(
        &self,
        session_id: &str,
        id: &str,
    ) -> Result<Option<(Attachment, Vec<u8>)>, StorageError> {
        let mut found = self.store.file_bytes(session_id, &[id]).await?;
        Ok(found.pop().map(|(row, bytes)| (row.attachment(), bytes)))
    }

    /// Deletes one of the session's files (a message that named it then carries its metadata only).
    pub async fn delete(&self, session_id: &str, id: &str) -> Result<bool, StorageError> {
        self.store.delete_file(session_id, id).await
    }

    /// The contents of every uploaded file `history` names, by id.
    pub async fn contents(
        &self,
        session_id: &str,
        history: &[ChatMessage],
    ) -> Result<FileContents, StorageError> {
        let ids: Vec<&str> = history
            .iter()
            .flat_map(|m| &m.attachments)
            .filter_map(|a| a.id.as_deref())
            .collect();
        let rows = self.store.file_bytes(session_id, &ids).await?;
        Ok(rows
            .into_iter()
            .filter_map(|(row, bytes)| {
                let content = match row.kind()? {
                    FileKind::Image => FileContent::Image {
                        media_type: row.mime_type,
                        base64: Arc::from(base64::engine::general_purpose::STANDARD.encode(bytes)),
                    },
                    FileKind::Text => FileContent::Text(Arc::from(text_of(&bytes)?)),
                };
                Some((row.id, content))
            })
            .collect())
    }
}

/// Refuses bytes that are not what the file's kind and type say; an image's width and height.
fn check_bytes(
    name: &str,
    kind: FileKind,
    mime: &str,
    bytes: &[u8],
) -> Result<Option<(u32, u32)>, FileError> {
    match kind {
        FileKind::Image => {
            let not_it = || FileError::NotThatImage {
                name: name.to_owned(),
                mime: mime.to_owned(),
            };
            if sniff_image(bytes) != Some(mime) {
                return Err(not_it());
            }
            let size = imagesize::blob_size(bytes).map_err(|_| not_it())?;
            let side = |n: usize| u32::try_from(n).ok().filter(|&n| n > 0);
            match (side(size.width), side(size.height)) {
                (Some(w), Some(h)) => Ok(Some((w, h))),
                _ => Err(not_it()),
            }
        }
        FileKind::Text => match text_of(bytes) {
            Some(_) => Ok(None),
            None => Err(FileError::NotText {
                name: name.to_owned(),
            }),
        },
    }
}

/// The image type the bytes begin with.
fn sniff_image(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// A text file's text: UTF-8 (a byte-order mark dropped) with no NUL byte.
fn text_of(bytes: &[u8]) -> Option<&str> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes)
        .ok()
        .filter(|t| !t.contains('\0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3 × 2 PNG (header and IHDR only: enough for its type and size).
    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        b.extend(width.to_be_bytes());
        b.extend(height.to_be_bytes());
        b.extend([8, 6, 0, 0, 0, 0, 0, 0, 0]);
        b
    }

    #[test]
    fn an_image_must_be_the_type_it_says() {
        assert_eq!(
            check_bytes("a.png", FileKind::Image, "image/png", &png(3, 2)),
            Ok(Some((3, 2)))
        );
        let e = check_bytes("a.jpg", FileKind::Image, "image/jpeg", &png(3, 2)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a.jpg is not the image/jpeg image it says it is"
        );
        assert!(check_bytes("a.png", FileKind::Image, "image/png", b"<svg/>").is_err());
        assert!(check_bytes("a.png", FileKind::Image, "image/png", &png(0, 2)).is_err());
    }

    #[test]
    fn a_text_file_must_be_utf8_without_nul() {
        assert_eq!(
            check_bytes("a.txt", FileKind::Text, "text/plain", "héllo".as_bytes()),
            Ok(None)
        );
        assert!(check_bytes("a.txt", FileKind::Text, "text/plain", b"\xff\xfe").is_err());
        assert!(check_bytes("a.txt", FileKind::Text, "text/plain", b"a\0b").is_err());
        assert_eq!(text_of(b"\xEF\xBB\xBFhi"), Some("hi"));
    }
}
