//! Uploaded files: stored with their bytes, bounded per session, deleted with their session.

use glassbox_core::attachments::{FileKind, MAX_SESSION_FILE_BYTES};
use glassbox_core::vocab::Attachment;

use super::named::{name, parse};
use super::{StorageError, Store, on_db, params};

/// A file about to be stored (already checked: its kind, size and bytes).
#[derive(Debug, Clone)]
pub struct NewFile<'a> {
    pub id: &'a str,
    pub session_id: &'a str,
    pub name: &'a str,
    pub mime_type: &'a str,
    pub kind: FileKind,
    pub dimensions: Option<(u32, u32)>,
    pub bytes: &'a [u8],
    pub created_at: i64,
}

/// Whether a file was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileStored {
    Stored,
    /// The session's files already take `used` bytes and this one would pass the limit.
    SessionFull {
        used: u64,
    },
    /// The server's files already take `used` bytes and this one would pass `max`.
    ServerFull {
        used: u64,
    },
}

/// A stored file's description (no bytes).
#[derive(Debug, Clone, PartialEq, sqlx_macros::FromRow)]
pub struct FileRow {
    pub id: String,
    pub name: String,
    pub mime_type: String,
    pub kind: String,
    pub size: i64,
    pub width: Option<i64>,
    pub height: Option<i64>,
}

impl FileRow {
    /// Its kind (`None` for a kind this version does not know).
    pub fn kind(&self) -> Option<FileKind> {
        parse(&self.kind).ok()
    }

    /// The attachment a message carries for it.
    pub fn attachment(&self) -> Attachment {
        Attachment {
            id: Some(self.id.clone()),
            name: self.name.clone(),
            mime_type: Some(self.mime_type.clone()),
            size: u64::try_from(self.size).ok(),
            url: None,
            width: self.width.and_then(|w| u32::try_from(w).ok()),
            height: self.height.and_then(|h| u32::try_from(h).ok()),
        }
    }
}

/// A [`FileRow`] with the file's bytes (`None`: an image's, left out).
#[derive(sqlx_macros::FromRow)]
struct FileWithBytes {
    #[sqlx(flatten)]
    file: FileRow,
    bytes: Option<Vec<u8>>,
}

const FILE_COLUMNS: &str = "id, name, mime_type, kind, size, width, height";

/// PostgreSQL's advisory lock that counts uploads against the server-wide cap one at a time
/// ("gbfiles" in ASCII).
const FILES_CAP_LOCK: i64 = 0x0067_6266_696c_6573;

/// Most ids bound in one query (a session's files are far fewer).
const IDS_PER_QUERY: usize = 500;

impl Store {
    /// Stores `f` unless it would take its session past [`MAX_SESSION_FILE_BYTES`] or the server
    /// past `server_max` bytes of files (0: no server-wide limit).
    pub async fn insert_file(
        &self,
        f: &NewFile<'_>,
        server_max: u64,
    ) -> Result<FileStored, StorageError> {
        let size = f.bytes.len() as u64;
        on_db!(self, write, |db, d| {
            let mut tx = db.begin().await?;
            // The session's row locked (PostgreSQL): its uploads are counted one at a time; and
            // with a server-wide cap, every upload's (one transaction-wide advisory lock).
            super::lock_session!(d, tx, f.session_id);
            if server_max > 0 && d == super::Dialect::Postgres {
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(FILES_CAP_LOCK)
                    .execute(&mut *tx)
                    .await?;
            }
            let used: i64 = sqlx::query_scalar(
                "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM files WHERE session_id = $1",
            )
            .bind(f.session_id)
            .fetch_one(&mut *tx)
            .await?;
            let used = u64::try_from(used).unwrap_or(0);
            if used + size > MAX_SESSION_FILE_BYTES {
                return Ok(FileStored::SessionFull { used });
            }
            if server_max > 0 {
                // Read from the `files_by_size` index alone, not the rows with their bytes.
                let all: i64 =
                    sqlx::query_scalar("SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM files")
                        .fetch_one(&mut *tx)
                        .await?;
                let all = u64::try_from(all).unwrap_or(0);
                if all + size > server_max {
                    return Ok(FileStored::ServerFull { used: all });
                }
            }
            sqlx::query(
                "INSERT INTO files (id, session_id, name, mime_type, kind, size, width, height, \
                 bytes, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            )
            .bind(f.id)
            .bind(f.session_id)
            .bind(f.name)
            .bind(f.mime_type)
            .bind(name(f.kind))
            .bind(f.bytes.len() as i64)
            .bind(f.dimensions.map(|(w, _)| i64::from(w)))
            .bind(f.dimensions.map(|(_, h)| i64::from(h)))
            .bind(f.bytes)
            .bind(f.created_at)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(FileStored::Stored)
        })
    }

    /// The descriptions of the session's files among `ids` (others, and other sessions', are not
    /// returned).
    pub async fn files(
        &self,
        session_id: &str,
        ids: &[&str],
    ) -> Result<Vec<FileRow>, StorageError> {
        let mut out = Vec::new();
        for chunk in ids.chunks(IDS_PER_QUERY) {
            let sql = format!(
                "SELECT {FILE_COLUMNS} FROM files WHERE session_id = $1 AND id IN ({})",
                params(2, chunk.len())
            );
            let rows: Vec<FileRow> = on_db!(self, read, |db, d| {
                let mut q = sqlx::query_as(&sql).bind(session_id);
                for id in chunk {
                    q = q.bind(*id);
                }
                q.fetch_all(db).await?
            });
            out.extend(rows);
        }
        Ok(out)
    }

    /// The session's files among `ids`, with their bytes; an image's bytes are left empty unless
    /// `with_images`.
    pub async fn file_bytes(
        &self,
        session_id: &str,
        ids: &[&str],
        with_images: bool,
    ) -> Result<Vec<(FileRow, Vec<u8>)>, StorageError> {
        let bytes = if with_images {
            "bytes".to_owned()
        } else {
            format!(
                "CASE WHEN kind = '{}' THEN NULL ELSE bytes END AS bytes",
                name(FileKind::Image)
            )
        };
        let mut out = Vec::new();
        for chunk in ids.chunks(IDS_PER_QUERY) {
            let sql = format!(
                "SELECT {FILE_COLUMNS}, {bytes} FROM files WHERE session_id = $1 AND id IN ({})",
                params(2, chunk.len())
            );
            let rows: Vec<FileWithBytes> = on_db!(self, read, |db, d| {
                let mut q = sqlx::query_as(&sql).bind(session_id);
                for id in chunk {
                    q = q.bind(*id);
                }
                q.fetch_all(db).await?
            });
            out.extend(
                rows.into_iter()
                    .map(|r| (r.file, r.bytes.unwrap_or_default())),
            );
        }
        Ok(out)
    }

    /// Deletes the files uploaded before `before` (ms) that no message of their session names;
    /// answers how many.
    pub async fn delete_unsent_files(&self, before: i64) -> Result<u64, StorageError> {
        let sql = "DELETE FROM files WHERE created_at < $1 AND NOT EXISTS (SELECT 1 FROM messages m \
             WHERE m.session_id = files.session_id AND m.attachments_json LIKE '%' || files.id || '%')";
        Ok(on_db!(self, write, |db, d| {
            sqlx::query(sql)
                .bind(before)
                .execute(db)
                .await?
                .rows_affected()
        }))
    }

    /// Deletes one of the session's files; false when it had none of that id.
    pub async fn delete_file(&self, session_id: &str, id: &str) -> Result<bool, StorageError> {
        let sql = "DELETE FROM files WHERE session_id = $1 AND id = $2";
        let done = on_db!(self, write, |db, d| {
            sqlx::query(sql)
                .bind(session_id)
                .bind(id)
                .execute(db)
                .await?
                .rows_affected()
        });
        Ok(done > 0)
    }
}
