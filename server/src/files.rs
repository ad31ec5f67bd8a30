//! Files users attach: an upload is checked (kind, size, and that its bytes are what its type
//! says), stored within the session's limit, and named by id in the message that carries it. A
//! turn gathers the contents of its history's files: images as base64, text files as text.

use std::sync::Arc;

use base64::Engine as _;
use glassbox_core::attachments::{
    FileContent, FileContents, FileError, FileKind, MAX_IMAGE_SIDE, check_size, classify,
    files_to_send,
};
use glassbox_core::vocab::Attachment;
use glassbox_core::wire::ChatMessage;
use thiserror::Error;

use crate::ids::{new_id, now_ms};
use crate::storage::{FileStored, NewFile, StorageError, Store};
use crate::wire_error::ToWire;

/// Why a file or a message's attachments were refused.
#[derive(Debug, Error)]
pub enum FilesError {
    #[error(transparent)]
    Refused(#[from] FileError),
    #[error("{0} is not a file of this conversation: it was deleted, or belongs to another one")]
    Unknown(String),
    #[error("too many files are being uploaded to this server; try again in a moment")]
    Busy,
    #[error("{0} cannot be stored: this server keeps as many files as it may")]
    ServerFull(String),
    #[error("storage failed")]
    Storage(#[from] StorageError),
}

impl ToWire for FilesError {
    fn code(&self) -> glassbox_core::ErrorCode {
        match self {
            FilesError::Refused(e) => e.code(),
            FilesError::Unknown(_) => glassbox_core::ErrorCode::InvalidAttachment,
            FilesError::Busy => glassbox_core::ErrorCode::Overloaded,
            FilesError::ServerFull(_) => glassbox_core::ErrorCode::StorageFull,
            FilesError::Storage(e) => e.code(),
        }
    }
}

/// Most uploads read at once, server-wide (each holds up to `MAX_IMAGE_BYTES` in memory).
const MAX_UPLOADS_AT_ONCE: usize = 16;
/// How long an upload waits for a place among those being read (its body still unread) before
/// it is refused with `overloaded`.
const UPLOAD_QUEUE_WAIT: std::time::Duration = std::time::Duration::from_secs(20);
/// Most uploads waiting for a place; more are refused at once (each holds a connection).
const MAX_UPLOADS_WAITING: usize = 256;
/// How long an uploaded file no message carries is kept.
const UNSENT_FILE_TTL_MS: i64 = 24 * 3_600 * 1_000;

/// A place among the uploads being read, held until the upload is stored or refused.
pub struct UploadSlot {
    _admitted: tokio::sync::OwnedSemaphorePermit,
    _reading: tokio::sync::OwnedSemaphorePermit,
}

/// The session's files.
#[derive(Debug, Clone)]
pub struct Files {
    store: Store,
    uploads: Arc<tokio::sync::Semaphore>,
    /// Places for uploads being read or waiting to be; past them an upload is refused at once.
    admitted: Arc<tokio::sync::Semaphore>,
    /// Bytes of files the whole server keeps (0: no limit).
    max_bytes: u64,
}

impl Files {
    /// The files of `store`, at most `max_bytes` of them server-wide (0: no limit).
    pub fn new(store: Store, max_bytes: u64) -> Self {
        Self {
            store,
            uploads: Arc::new(tokio::sync::Semaphore::new(MAX_UPLOADS_AT_ONCE)),
            admitted: Arc::new(tokio::sync::Semaphore::new(
                MAX_UPLOADS_AT_ONCE + MAX_UPLOADS_WAITING,
            )),
            max_bytes,
        }
    }

    /// A place among the uploads being read, waited for in turn; refused (`overloaded`) when
    /// none frees up within `UPLOAD_QUEUE_WAIT`, or at once when `MAX_UPLOADS_WAITING` wait.
    pub async fn upload_slot(&self) -> Result<UploadSlot, FilesError> {
        let admitted = self
            .admitted
            .clone()
            .try_acquire_owned()
            .map_err(|_| FilesError::Busy)?;
        let reading = tokio::time::timeout(UPLOAD_QUEUE_WAIT, self.uploads.clone().acquire_owned())
            .await
            .map_err(|_| FilesError::Busy)?
            .map_err(|_| FilesError::Busy)?;
        Ok(UploadSlot {
            _admitted: admitted,
            _reading: reading,
        })
    }

    /// Deletes files uploaded over a day ago that no message carries (removed from the
    /// composer, or left when the page closed); answers how many.
    pub async fn purge_unsent(&self) -> Result<u64, StorageError> {
        self.store
            .delete_unsent_files(now_ms() - UNSENT_FILE_TTL_MS)
            .await
    }

    /// Checks and stores an uploaded file; answers the attachment a message carries for it.
    pub async fn upload(
        &self,
        session_id: &str,
        name: &str,
        declared_type: &str,
        bytes: &[u8],
    ) -> Result<Attachment, FilesError> {
        // A name is shown and stored: control characters (NUL among them) are left out.
        let name: String = name.chars().filter(|c| !c.is_control()).collect();
        let name = name.as_str();
        let (kind, declared) = classify(name, declared_type)?;
        check_size(name, kind, bytes.len() as u64)?;
        let (mime, dimensions) = check_bytes(name, kind, &declared, bytes)?;
        let id = new_id();
        let stored = self
            .store
            .insert_file(
                &NewFile {
                    id: &id,
                    session_id,
                    name,
                    mime_type: &mime,
                    kind,
                    dimensions,
                    bytes,
                    created_at: now_ms(),
                },
                self.max_bytes,
            )
            .await?;
        match stored {
            FileStored::Stored => {}
            FileStored::SessionFull { used } => {
                return Err(FileError::SessionFull {
                    name: name.to_owned(),
                    used,
                }
                .into());
            }
            FileStored::ServerFull { used } => {
                tracing::warn!(
                    used,
                    max = self.max_bytes,
                    "file storage is full (GLASSBOX_FILES_MAX_BYTES): an upload was refused"
                );
                return Err(FilesError::ServerFull(name.to_owned()));
            }
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
                    .ok_or_else(|| {
                        FilesError::Unknown(if a.name.is_empty() {
                            format!("file {id}")
                        } else {
                            a.name.clone()
                        })
                    }),
            })
            .collect()
    }

    /// One file's description and bytes, if the session has it.
    pub async fn get(
        &self,
        session_id: &str,
        id: &str,
    ) -> Result<Option<(Attachment, Vec<u8>)>, StorageError> {
        let mut found = self.store.file_bytes(session_id, &[id], true).await?;
        Ok(found.pop().map(|(row, bytes)| (row.attachment(), bytes)))
    }

    /// Deletes one of the session's files (a message that named it then carries its metadata only).
    pub async fn delete(&self, session_id: &str, id: &str) -> Result<bool, StorageError> {
        self.store.delete_file(session_id, id).await
    }

    /// The contents of the uploaded files of `history` that go with their messages, by id
    /// (`core::attachments::files_to_send`). An image's bytes are read only `with_images` (a
    /// preview prices an image by its size, not its bytes).
    pub async fn contents(
        &self,
        session_id: &str,
        history: &[ChatMessage],
        with_images: bool,
    ) -> Result<FileContents, StorageError> {
        let ids: Vec<&str> = files_to_send(history.iter().map(|m| &m.attachments[..]))
            .into_iter()
            .filter_map(|a| a.id.as_deref())
            .collect();
        let rows = self.store.file_bytes(session_id, &ids, with_images).await?;
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

/// Refuses bytes that are not what the file's kind says: an image must be one of the accepted
/// types (whichever its name or declared type said: the type its bytes begin with is kept), a
/// still image, at most [`MAX_IMAGE_SIDE`] pixels a side; a text file must be text. Answers the
/// type to keep and an image's width and height.
fn check_bytes(
    name: &str,
    kind: FileKind,
    declared: &str,
    bytes: &[u8],
) -> Result<(String, Option<(u32, u32)>), FileError> {
    match kind {
        FileKind::Image => {
            let not_it = || FileError::NotAnImage {
                name: name.to_owned(),
            };
            let mime = sniff_image(bytes).ok_or_else(not_it)?;
            let size = imagesize::blob_size(bytes).map_err(|_| not_it())?;
            let side = |n: usize| u32::try_from(n).ok().filter(|&n| n > 0);
            let (Some(width), Some(height)) = (side(size.width), side(size.height)) else {
                return Err(not_it());
            };
            if width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE {
                return Err(FileError::TooManyPixels {
                    name: name.to_owned(),
                    width,
                    height,
                });
            }
            if mime == "image/gif" && gif_frames(bytes) > 1 {
                return Err(FileError::Animated {
                    name: name.to_owned(),
                });
            }
            Ok((mime.to_owned(), Some((width, height))))
        }
        FileKind::Text => match text_of(bytes) {
            Some(_) => Ok((declared.to_owned(), None)),
            None => Err(FileError::NotText {
                name: name.to_owned(),
            }),
        },
    }
}

/// How many frames a GIF has: its image descriptors, found by walking its blocks.
fn gif_frames(bytes: &[u8]) -> usize {
    // Header (6) and logical screen descriptor (7), then the global colour table if flagged.
    let Some(&flags) = bytes.get(10) else {
        return 0;
    };
    let mut at = 13
        + if flags & 0x80 != 0 {
            3 << ((flags & 7) + 1)
        } else {
            0
        };
    let skip_sub_blocks = |mut at: usize| {
        while let Some(&n) = bytes.get(at) {
            at += 1 + usize::from(n);
            if n == 0 {
                break;
            }
        }
        at
    };
    let mut frames = 0;
    while let Some(&block) = bytes.get(at) {
        match block {
            0x2C => {
                frames += 1;
                let Some(&local) = bytes.get(at + 9) else {
                    break;
                };
                at += 10
                    + if local & 0x80 != 0 {
                        3 << ((local & 7) + 1)
                    } else {
                        0
                    };
                at = skip_sub_blocks(at + 1); // LZW minimum code size, then the data
            }
            0x21 => at = skip_sub_blocks(at + 2),
            _ => break, // 0x3B trailer, or not a GIF block
        }
    }
    frames
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

    /// A 1 × 1 GIF of `frames` frames, each behind a graphic control extension.
    fn gif(frames: usize) -> Vec<u8> {
        let mut b = b"GIF89a\x01\0\x01\0\x80\0\0".to_vec();
        b.extend([0, 0, 0, 255, 255, 255]); // global colour table, 2 colours
        for _ in 0..frames {
            b.extend([0x21, 0xF9, 4, 0, 0, 0, 0, 0]);
            b.extend([0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0]);
            b.extend([2, 2, 0x44, 1, 0]);
        }
        b.push(0x3B);
        b
    }

    #[test]
    fn an_image_must_be_an_accepted_still_image_of_bounded_size() {
        assert_eq!(
            check_bytes("a.png", FileKind::Image, "image/png", &png(3, 2)),
            Ok(("image/png".to_owned(), Some((3, 2))))
        );
        // Named and declared a JPEG, its bytes a PNG: kept as the PNG it is.
        assert_eq!(
            check_bytes("a.jpg", FileKind::Image, "image/jpeg", &png(3, 2)),
            Ok(("image/png".to_owned(), Some((3, 2))))
        );
        let e = check_bytes("a.png", FileKind::Image, "image/png", b"<svg/>").unwrap_err();
        assert_eq!(e.to_string(), "a.png is not a PNG, JPEG, GIF or WebP image");
        assert!(check_bytes("a.png", FileKind::Image, "image/png", &png(0, 2)).is_err());
        let e = check_bytes("w.png", FileKind::Image, "image/png", &png(8001, 10)).unwrap_err();
        assert_eq!(e.code(), glassbox_core::ErrorCode::FileTooLarge);
        assert_eq!(gif_frames(&gif(1)), 1);
        assert_eq!(gif_frames(&gif(3)), 3);
        assert!(check_bytes("still.gif", FileKind::Image, "image/gif", &gif(1)).is_ok());
        let e = check_bytes("moving.gif", FileKind::Image, "image/gif", &gif(2)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "moving.gif is an animated GIF; attach a still image"
        );
    }

    #[test]
    fn a_text_file_must_be_utf8_without_nul() {
        assert_eq!(
            check_bytes("a.txt", FileKind::Text, "text/plain", "héllo".as_bytes()),
            Ok(("text/plain".to_owned(), None))
        );
        assert!(check_bytes("a.txt", FileKind::Text, "text/plain", b"\xff\xfe").is_err());
        assert!(check_bytes("a.txt", FileKind::Text, "text/plain", b"a\0b").is_err());
        assert_eq!(text_of(b"\xEF\xBB\xBFhi"), Some("hi"));
    }
}
