//! Persistence of sessions and messages, on SQLite (`glassbox.db` in the data folder, the default)
//! or PostgreSQL (`GLASSBOX_DATABASE_URL=postgres://…`), through sqlx's native driver for each.
//! Handlers call [`Store`]'s methods and never write SQL. Each method is written once: its
//! statements are the same text on both databases (`$1`-style parameters, which sqlx's SQLite
//! driver reads by number too; standard SQL both speak), run on the backend's pool by [`on_db!`].
//! A write of several statements that commit together (a turn's first write, a reply's last) is
//! described once as data (`write::Write`) and run by [`run_write!`]: on SQLite in one round trip
//! to the writer's thread, on PostgreSQL in a transaction.
//! What differs is said once, in [`Dialect`]:
//!
//! - trimming whitespace (SQLite's `trim(x, char(…))`, PostgreSQL's `btrim(x, chr(…) || …)`), in the
//!   predicate of the messages that reach the model (`history`);
//! - the message id out of an embedding cache key `{message_id}:{content_hash}` (`instr`/`substr`,
//!   `split_part`);
//! - row locks: PostgreSQL's `FOR UPDATE` where a transaction reads what it then writes (a
//!   session's settings; the session row before a message takes the next position), since its
//!   pool writes on many connections; SQLite writes through one connection, one transaction at a
//!   time, and needs none.
//!
//! The schema is the same on both (`server/migrations/sqlite`, `server/migrations/postgres`: a new
//! migration goes in both): JSON as text, integers as `BIGINT`, bytes as `BLOB` / `BYTEA`.
//! `tests/storage.rs` is the contract every backend passes; the server's tests also run on both.

mod column;
mod copy;
mod files;
mod history;
mod named;
mod reservations;
mod rows;
mod users;
pub mod wal;
mod write;

pub use copy::Copied;
pub use files::{FileRow, FileStored, NewFile};
pub use history::{PageEnd, Unread};
pub use reservations::{Caps, Hold, Reached};

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use glassbox_core::context::{MessageMark, Receipt, SessionSettings, SessionTopics};
use glassbox_core::vocab::{Attachment, MessageStatus, PageContext, Role, ToolRound, Usage};
use glassbox_core::wire::{ChatMessage, WireError};
use sqlx::FromRow as _;
use sqlx::SqlitePool;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use named::name;
use rows::{
    EmbeddingRow, MESSAGE_COLUMNS, MESSAGE_TEXT_COLUMNS, MessageRow, MessageTextRow, PlacedTextRow,
    Vector,
};
use thiserror::Error;

/// A storage failure.
#[derive(Debug, Error)]
pub enum StorageError {
    #[error("cannot create data dir {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored row is corrupt: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Url(String),
}

impl From<crate::cluster::FrameLogError> for StorageError {
    fn from(e: crate::cluster::FrameLogError) -> Self {
        match e {
            crate::cluster::FrameLogError::Database(e) => Self::Database(e),
            crate::cluster::FrameLogError::Corrupt(e) => Self::Corrupt(e.to_string()),
        }
    }
}

/// Which database a store is on, as `GLASSBOX_DATABASE_URL` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// `sqlite://PATH` (a file), or `glassbox.db` in the data folder when no URL is set.
    Sqlite(std::path::PathBuf),
    /// `postgres://…` or `postgresql://…` (as libpq writes it).
    Postgres(String),
}

impl DatabaseUrl {
    /// The database `url` names, else SQLite's file in `data_dir`.
    pub fn resolve(url: Option<&str>, data_dir: &Path) -> Result<Self, StorageError> {
        match url.map(str::trim).filter(|u| !u.is_empty()) {
            None => Ok(Self::Sqlite(data_dir.join("glassbox.db"))),
            Some(u) if u.starts_with("postgres://") || u.starts_with("postgresql://") => {
                Ok(Self::Postgres(u.to_owned()))
            }
            Some(u) => match u.strip_prefix("sqlite://").filter(|p| !p.is_empty()) {
                Some(path) => Ok(Self::Sqlite(path.into())),
                None => Err(StorageError::Url(format!(
                    "GLASSBOX_DATABASE_URL must be sqlite://PATH or postgres://…, not {:?}",
                    u.split('@').next_back().unwrap_or_default()
                ))),
            },
        }
    }

    /// The URL as logs may show it: a PostgreSQL password is left out.
    pub fn display(&self) -> String {
        match self {
            Self::Sqlite(path) => format!("sqlite://{}", path.display()),
            Self::Postgres(url) => {
                // No credentials: neither `user:password@` nor a `?password=` parameter.
                let url = url.split('?').next().unwrap_or_default();
                match url.split_once('@') {
                    Some((_, host)) => format!("postgres://…@{host}"),
                    None => url.to_owned(),
                }
            }
        }
    }
}

/// A stored session's credentials.
#[derive(Debug, Clone, sqlx_macros::FromRow)]
pub struct SessionRow {
    pub token_hash: String,
    /// The verified user the session belongs to (`None`: anonymous, reachable by token only).
    pub user_id: Option<String>,
}

/// Tokens spent, as the spending caps read them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    /// By the session, ever.
    pub session: u64,
    /// By the whole server today.
    pub server_day: u64,
    /// By the session's verified user today (0 for an anonymous session).
    pub user_day: u64,
}

/// A session about to be stored ([`Store::create_session`], or with its first message:
/// [`Store::insert_first_turn`]).
#[derive(Debug, Clone, Copy)]
pub struct NewSession<'a> {
    pub id: &'a str,
    pub token_hash: &'a str,
    pub created_at: i64,
    pub settings: &'a SessionSettings,
    /// The verified user it belongs to, if any.
    pub user_id: Option<&'a str>,
}

/// A user message about to be stored.
#[derive(Debug, Clone)]
pub struct NewUserMessage<'a> {
    pub id: &'a str,
    pub content: &'a str,
    pub client_message_id: Option<&'a str>,
    pub context: Option<&'a PageContext>,
    pub attachments: &'a [Attachment],
    pub created_at: i64,
}

/// Tokens one provider call spent, recorded with what ends it: its reservation (when one was
/// held) ends and the tokens count for the session, the server and the session's verified user
/// on `day`.
#[derive(Debug, Clone, Copy)]
pub struct Spend<'a> {
    pub reservation: Option<&'a str>,
    pub day: i64,
    pub tokens: u64,
}

/// The final state of a reply.
#[derive(Debug, Clone)]
pub struct ReplyOutcome<'a> {
    pub content: &'a str,
    pub status: MessageStatus,
    pub usage: Option<Usage>,
    pub receipt: Option<&'a Receipt>,
    pub tool_rounds: &'a [ToolRound],
    pub error: Option<&'a WireError>,
}

/// The database of a [`Store`].
#[derive(Debug, Clone)]
enum Db {
    /// Writes through one connection (SQLite has one writer at a time; queueing in the pool is
    /// fairer and faster than SQLite's busy-wait sleeps), reads through a small read-only pool.
    Sqlite {
        writer: SqlitePool,
        reader: SqlitePool,
        /// Copies the write-ahead log into the database beside the writer ([`wal`]).
        _wal: Option<Arc<wal::Checkpointer>>,
    },
    Postgres(PgPool),
}

/// What the two databases write differently (see the module's head).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Sqlite,
    Postgres,
}

/// The characters Rust's `str::trim` removes (Unicode `White_Space`), as code points.
const WHITESPACE: [u32; 25] = [
    9, 10, 11, 12, 13, 32, 133, 160, 5760, 8192, 8193, 8194, 8195, 8196, 8197, 8198, 8199, 8200,
    8201, 8202, 8232, 8233, 8239, 8287, 12288,
];

impl Dialect {
    /// `column` without leading or trailing Unicode whitespace, in SQL.
    fn trimmed(self, column: &str) -> String {
        let codes = WHITESPACE.map(|c| c.to_string());
        match self {
            Dialect::Sqlite => format!("trim({column}, char({}))", codes.join(", ")),
            Dialect::Postgres => {
                let chars: Vec<String> = codes.iter().map(|c| format!("chr({c})")).collect();
                format!("btrim({column}, {})", chars.join(" || "))
            }
        }
    }

    /// The message id of a message embedding's cache key column (`{message_id}:{content_hash}`).
    fn key_message_id(self) -> &'static str {
        match self {
            Dialect::Sqlite => "substr(cache_key, 1, instr(cache_key, ':') - 1)",
            Dialect::Postgres => "split_part(cache_key, ':', 1)",
        }
    }

    /// What ends a `SELECT` that reads rows its transaction then writes.
    fn for_update(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            // Not `FOR UPDATE`: that would also wait for the key-share locks of rows that refer
            // to it (a child row's insert), which these transactions take themselves.
            Dialect::Postgres => " FOR NO KEY UPDATE",
        }
    }
}

/// Runs `$body` on the store's database, with `$db` its pool (`write` or `read`: SQLite's writer
/// connection or its read-only pool; PostgreSQL's one pool either way) and `$d` its [`Dialect`].
/// The body is compiled for each backend, so each statement binds and decodes on both.
macro_rules! on_db {
    ($store:expr, write, |$db:ident, $d:ident| $body:expr) => {
        match &$store.db {
            $crate::storage::Db::Sqlite { writer: $db, .. } => {
                #[allow(unused_variables)]
                let $d = $crate::storage::Dialect::Sqlite;
                $body
            }
            $crate::storage::Db::Postgres($db) => {
                #[allow(unused_variables)]
                let $d = $crate::storage::Dialect::Postgres;
                $body
            }
        }
    };
    ($store:expr, read, |$db:ident, $d:ident| $body:expr) => {
        match &$store.db {
            $crate::storage::Db::Sqlite { reader: $db, .. } => {
                #[allow(unused_variables)]
                let $d = $crate::storage::Dialect::Sqlite;
                $body
            }
            $crate::storage::Db::Postgres($db) => {
                #[allow(unused_variables)]
                let $d = $crate::storage::Dialect::Postgres;
                $body
            }
        }
    };
}
pub(crate) use on_db;

/// In transaction `$tx` that gives a message the session's next position: PostgreSQL locks the
/// session's row, so two connections cannot take the same one (SQLite's one writer connection
/// already runs one transaction at a time).
macro_rules! lock_session {
    ($d:expr, $tx:expr, $session_id:expr) => {
        if $d == $crate::storage::Dialect::Postgres {
            sqlx::query($crate::storage::LOCK_SESSION)
                .bind($session_id)
                .execute(&mut *$tx)
                .await?;
        }
    };
}
pub(crate) use lock_session;

/// PostgreSQL: locks a session's row (`$1`) until the transaction ends (see [`lock_session!`]).
const LOCK_SESSION: &str = "SELECT id FROM sessions WHERE id = $1 FOR NO KEY UPDATE";

/// Adds to `w`: store new session `session`.
fn insert_session(w: &mut write::Write, session: &NewSession<'_>) {
    w.push(
        "INSERT INTO sessions (id, token_hash, created_at, last_active_at, settings_json, \
         user_id) VALUES ($1, $2, $3, $3, $4, $5)",
        vec![
            session.id.into(),
            session.token_hash.into(),
            session.created_at.into(),
            to_json(session.settings).into(),
            session.user_id.into(),
        ],
    );
}

/// Adds to `w`: end `spend`'s reservation and add its tokens to session `session_id`'s total,
/// the server's day and (for a verified user's session) the user's day. Answers the place of the
/// statement whose rows have the session's total ([`tokens_used`]).
///
/// The session's row is written first, as every writer takes it: on PostgreSQL a write that held
/// the reservation's row while it waited for the session's would deadlock with the session's
/// delete, which holds the session's row and deletes its reservations with it.
fn settle(w: &mut write::Write, session_id: &str, spend: &Spend<'_>) -> usize {
    let tokens = i64::try_from(spend.tokens).unwrap_or(i64::MAX);
    let used_at = w.push(
        "UPDATE sessions SET tokens_used = tokens_used + $1 WHERE id = $2 RETURNING tokens_used",
        vec![tokens.into(), session_id.into()],
    );
    if let Some(id) = spend.reservation {
        w.push(
            "DELETE FROM budget_reservations WHERE id = $1",
            vec![id.into()],
        );
    }
    w.push(
        "INSERT INTO usage_days (day, tokens) VALUES ($1, $2) \
         ON CONFLICT (day) DO UPDATE SET tokens = usage_days.tokens + excluded.tokens",
        vec![spend.day.into(), tokens.into()],
    );
    // An anonymous session (most) has no user's day to add to. (SQLite reads the `ON` of an
    // upsert after a `SELECT` as a join's unless the `SELECT` has a `WHERE`, as this one does.)
    w.push(
        "INSERT INTO user_usage_days (user_id, day, tokens) \
         SELECT user_id, $1, $2 FROM sessions WHERE id = $3 AND user_id IS NOT NULL \
         ON CONFLICT (user_id, day) DO UPDATE SET tokens = user_usage_days.tokens + excluded.tokens",
        vec![spend.day.into(), tokens.into(), session_id.into()],
    );
    used_at
}

/// Runs write `$w` on the store's database (SQLite's writer in one round trip, PostgreSQL in a
/// transaction) and evaluates to `$each` applied to every statement's rows, `$i` bound to the
/// statement's place in the write and `$rows` to its rows (compiled for each backend's row type).
macro_rules! run_write {
    ($store:expr, $w:expr, |$i:pat_param, $rows:ident| $each:expr) => {
        match &$store.db {
            $crate::storage::Db::Sqlite { writer, .. } => $w
                .run_sqlite(writer)
                .await?
                .iter()
                .enumerate()
                .map(|($i, $rows)| $each)
                .collect::<Result<Vec<_>, StorageError>>()?,
            $crate::storage::Db::Postgres(pool) => $w
                .run_postgres(pool)
                .await?
                .iter()
                .enumerate()
                .map(|($i, $rows)| $each)
                .collect::<Result<Vec<_>, StorageError>>()?,
        }
    };
}

/// The session's total that a settle's `UPDATE … RETURNING tokens_used` answered ([`settle`]); 0
/// when the session is gone.
fn tokens_used<'r, R>(rows: &'r [R]) -> Result<u64, StorageError>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    Ok(match rows.first() {
        Some(row) => row.try_get::<i64, _>(0)?.max(0) as u64,
        None => 0,
    })
}

/// Messages a statement's `RETURNING {MESSAGE_COLUMNS}` answered.
fn messages<'r, R>(rows: &'r [R]) -> Result<Vec<MessageRow>, StorageError>
where
    R: sqlx::Row,
    MessageRow: sqlx::FromRow<'r, R>,
{
    rows.iter()
        .map(|row| Ok(MessageRow::from_row(row)?))
        .collect()
}

/// `n` numbered parameters from `$first` on, comma-separated (`$3, $4, $5`): an `IN` list.
fn params(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How the store opens the SQLite database at `path`: WAL, `synchronous = NORMAL`, foreign keys
/// on, a 5 s busy timeout.
pub fn sqlite_options(path: &Path) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(5))
}

/// The message store.
#[derive(Debug, Clone)]
pub struct Store {
    db: Db,
    /// The instance that produces the replies this store starts (written beside each streaming
    /// reply when several instances share the database; see [`Store::producing_as`]).
    producer: Option<Arc<str>>,
}

/// Most ids bound in one statement (SQLite allows 32,766 parameters, PostgreSQL 65,535).
const IDS_PER_STATEMENT: usize = 500;

/// Connections of the PostgreSQL pool.
const POSTGRES_CONNECTIONS: u32 = 16;

impl Store {
    /// Opens (creating if needed) the database `url` names and applies its migrations: SQLite in
    /// WAL mode with one writer connection, or a pool of PostgreSQL connections.
    pub async fn connect(url: &DatabaseUrl) -> Result<Self, StorageError> {
        match url {
            DatabaseUrl::Sqlite(path) => Self::open_sqlite(path).await,
            DatabaseUrl::Postgres(url) => {
                let options = PgConnectOptions::from_str(url)?;
                let pool = PgPoolOptions::new()
                    .max_connections(POSTGRES_CONNECTIONS)
                    .acquire_timeout(Duration::from_secs(10))
                    .connect_with(options)
                    .await?;
                // Text is UTF-8 throughout (and the schema's index names Unicode characters).
                let encoding: String = sqlx::query_scalar("SHOW server_encoding")
                    .fetch_one(&pool)
                    .await?;
                if encoding != "UTF8" {
                    return Err(StorageError::Url(format!(
                        "the PostgreSQL database is {encoding}, not UTF8: create it with \
                         `createdb -E UTF8 -T template0 …`"
                    )));
                }
                sqlx_macros::migrate!("./migrations/postgres")
                    .run(&pool)
                    .await?;
                Ok(Self {
                    db: Db::Postgres(pool),
                    producer: None,
                })
            }
        }
    }

    /// Opens (creating if needed) `glassbox.db` in `data_dir` (SQLite).
    pub async fn open(data_dir: &Path) -> Result<Self, StorageError> {
        Self::open_sqlite(&data_dir.join("glassbox.db")).await
    }

    async fn open_sqlite(path: &Path) -> Result<Self, StorageError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StorageError::DataDir {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let options = sqlite_options(path);
        let writer = wal::open_writer(&options).await?;
        sqlx_macros::migrate!("./migrations/sqlite")
            .run(&writer)
            .await?;
        let wal = match wal::start(&options, writer.clone(), wal::Schedule::DEFAULT).await {
            Ok(checkpointer) => Some(Arc::new(checkpointer)),
            Err(e) => {
                tracing::warn!(error = %e, "no WAL checkpoint connection; the writer checkpoints past its backstop");
                None
            }
        };
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .test_before_acquire(false)
            .connect_with(options.read_only(true))
            .await?;
        Ok(Self {
            db: Db::Sqlite {
                writer,
                reader,
                _wal: wal,
            },
            producer: None,
        })
    }

    /// This store, marking the replies it starts (and restarts) as produced by instance `id`.
    pub fn producing_as(mut self, id: &str) -> Self {
        self.producer = Some(Arc::from(id));
        self
    }

    /// The PostgreSQL pool, when the database is PostgreSQL (for what several instances share:
    /// the frame log, turn leases, the instances' heartbeats).
    pub fn postgres(&self) -> Option<&PgPool> {
        match &self.db {
            Db::Postgres(pool) => Some(pool),
            Db::Sqlite { .. } => None,
        }
    }

    /// Which SQL this store's database speaks.
    fn dialect(&self) -> Dialect {
        match self.db {
            Db::Sqlite { .. } => Dialect::Sqlite,
            Db::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Which database this is (`sqlite`, `postgres`), for logs and `/healthz`.
    pub fn backend(&self) -> &'static str {
        match self.dialect() {
            Dialect::Sqlite => "sqlite",
            Dialect::Postgres => "postgres",
        }
    }

    /// Marks replies left `streaming` by a previous process as failed, so they can be retried.
    pub async fn fail_interrupted(&self, error: &WireError) -> Result<u64, StorageError> {
        let sql = "UPDATE messages SET status = $1, error_json = $2 WHERE status = $3";
        let res = on_db!(self, write, |db, d| {
            sqlx::query(sql)
                .bind(name(MessageStatus::Failed))
                .bind(to_json(error))
                .bind(name(MessageStatus::Streaming))
                .execute(db)
                .await?
                .rows_affected()
        });
        Ok(res)
    }

    /// Stores a new session.
    pub async fn create_session(&self, session: &NewSession<'_>) -> Result<(), StorageError> {
        let mut w = write::Write::default();
        insert_session(&mut w, session);
        run_write!(self, w, |_, _rows| Ok(()));
        Ok(())
    }

    /// Tokens spent by `session_id`, by the whole server on `day` (days since the epoch, UTC), and
    /// by the session's verified user on `day` (0 for an anonymous session).
    pub async fn tokens_spent(&self, session_id: &str, day: i64) -> Result<Spent, StorageError> {
        self.tokens_spent_of(session_id, None, day).await
    }

    /// As [`Store::tokens_spent`], with the user's day read for `user_id` when given (a new
    /// session not stored yet has no row to find its user by).
    pub async fn tokens_spent_of(
        &self,
        session_id: &str,
        user_id: Option<&str>,
        day: i64,
    ) -> Result<Spent, StorageError> {
        let sql = "SELECT (SELECT tokens_used FROM sessions WHERE id = $1) AS session, \
                    (SELECT tokens FROM usage_days WHERE day = $2) AS day, \
                    (SELECT tokens FROM user_usage_days WHERE day = $2 AND user_id = \
                       COALESCE($3, (SELECT user_id FROM sessions WHERE id = $1))) AS user_day";
        let (session, server, user): (Option<i64>, Option<i64>, Option<i64>) =
            on_db!(self, write, |db, d| {
                sqlx::query_as(sql)
                    .bind(session_id)
                    .bind(day)
                    .bind(user_id)
                    .fetch_one(db)
                    .await?
            });
        let n = |v: Option<i64>| v.unwrap_or(0).max(0) as u64;
        Ok(Spent {
            session: n(session),
            server_day: n(server),
            user_day: n(user),
        })
    }

    /// Adds `tokens` to what `session_id`, the server and the session's verified user (if any)
    /// spent on `day`; returns the session's total.
    pub async fn spend_tokens(
        &self,
        session_id: &str,
        day: i64,
        tokens: u64,
    ) -> Result<u64, StorageError> {
        let spend = Spend {
            reservation: None,
            day,
            tokens,
        };
        self.settle_tokens(session_id, spend).await
    }

    /// Ends `spend`'s reservation (when there was one) and adds its tokens to what the session,
    /// the server and the session's verified user spent on its day, in one transaction (a call is
    /// counted as held or as spent, never neither); returns the session's total.
    pub async fn settle_tokens(
        &self,
        session_id: &str,
        spend: Spend<'_>,
    ) -> Result<u64, StorageError> {
        let mut w = write::Write::default();
        let used_at = settle(&mut w, session_id, &spend);
        let used = run_write!(self, w, |i, rows| match i == used_at {
            true => tokens_used(rows).map(Some),
            false => Ok(None),
        });
        Ok(used.into_iter().flatten().next().unwrap_or(0))
    }

    /// Marks a session used at `now` (written at most once a minute per session).
    pub async fn touch_session(&self, id: &str, now: i64) -> Result<(), StorageError> {
        on_db!(self, write, |db, d| {
            sqlx::query(TOUCH)
                .bind(now)
                .bind(id)
                .bind(now - 60_000)
                .execute(db)
                .await?;
        });
        Ok(())
    }

    /// Deletes a session with its messages, summaries and cached message embeddings; returns the
    /// cache keys of the embeddings deleted, or `None` when there was no such session.
    pub async fn delete_session(&self, id: &str) -> Result<Option<Vec<String>>, StorageError> {
        let (keys, gone) = on_db!(self, write, |db, d| {
            let mut tx = db.begin().await?;
            // The session's row first, as every writer takes it.
            lock_session!(d, tx, id);
            let keys: Vec<String> = sqlx::query_scalar(&format!(
                "DELETE FROM embedding_cache WHERE {} IN \
                 (SELECT id FROM messages WHERE session_id = $1) RETURNING cache_key",
                d.key_message_id()
            ))
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
            let gone = sqlx::query("DELETE FROM sessions WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            (keys, gone)
        });
        Ok((gone > 0).then_some(keys))
    }

    /// Up to `limit` sessions not used since `before` (ms), except those in `keep` (live ones), in
    /// the order of their ids (the order their gates are taken in).
    pub async fn idle_sessions(
        &self,
        before: i64,
        keep: &[String],
        limit: i64,
    ) -> Result<Vec<String>, StorageError> {
        // The live ones are skipped here, not in the statement: at most `keep.len()` more read.
        let read = limit.saturating_add(i64::try_from(keep.len()).unwrap_or(i64::MAX));
        let sql = "SELECT id FROM sessions WHERE last_active_at < $1 ORDER BY id LIMIT $2";
        let ids: Vec<String> = on_db!(self, read, |db, d| {
            sqlx::query_scalar(sql)
                .bind(before)
                .bind(read)
                .fetch_all(db)
                .await?
        });
        let keep: std::collections::HashSet<&str> = keep.iter().map(String::as_str).collect();
        Ok(ids
            .into_iter()
            .filter(|id| !keep.contains(id.as_str()))
            .take(usize::try_from(limit).unwrap_or(0))
            .collect())
    }

    /// Deletes those of `ids` still not used since `before` (ms), like [`Store::delete_session`],
    /// in one transaction; returns the ids deleted and the cache keys of their embeddings.
    pub async fn delete_idle_sessions(
        &self,
        ids: &[String],
        before: i64,
    ) -> Result<(Vec<String>, Vec<String>), StorageError> {
        let mut deleted = Vec::new();
        let mut keys = Vec::new();
        for chunk in ids.chunks(IDS_PER_STATEMENT) {
            let list = params(2, chunk.len());
            let (ids, gone_keys) = on_db!(self, write, |db, d| {
                let mut tx = db.begin().await?;
                // Used since they were chosen: kept.
                let sql = format!(
                    "SELECT id FROM sessions WHERE last_active_at < $1 AND id IN ({list}) \
                     ORDER BY id{}",
                    d.for_update()
                );
                let mut query = sqlx::query_scalar(&sql).bind(before);
                for id in chunk {
                    query = query.bind(id);
                }
                let ids: Vec<String> = query.fetch_all(&mut *tx).await?;
                let mut gone_keys = Vec::new();
                if !ids.is_empty() {
                    let list = params(1, ids.len());
                    let sql = format!(
                        "DELETE FROM embedding_cache WHERE {} IN \
                         (SELECT m.id FROM messages m WHERE m.session_id IN ({list})) \
                         RETURNING cache_key",
                        d.key_message_id()
                    );
                    let mut query = sqlx::query_scalar(&sql);
                    for id in &ids {
                        query = query.bind(id);
                    }
                    gone_keys = query.fetch_all(&mut *tx).await?;
                    let sql = format!("DELETE FROM sessions WHERE id IN ({list})");
                    let mut query = sqlx::query(&sql);
                    for id in &ids {
                        query = query.bind(id);
                    }
                    query.execute(&mut *tx).await?;
                }
                tx.commit().await?;
                (ids, gone_keys)
            });
            deleted.extend(ids);
            keys.extend(gone_keys);
        }
        Ok((deleted, keys))
    }

    /// Looks a session up.
    pub async fn session(&self, id: &str) -> Result<Option<SessionRow>, StorageError> {
        let sql = "SELECT token_hash, user_id FROM sessions WHERE id = $1";
        Ok(on_db!(self, read, |db, d| {
            sqlx::query_as(sql).bind(id).fetch_optional(db).await?
        }))
    }

    /// Stores a user message without a reply (an imported one). If its `client_message_id` was
    /// stored before, returns that message and `true` instead of storing a second one.
    pub async fn insert_user_message(
        &self,
        session_id: &str,
        m: &NewUserMessage<'_>,
    ) -> Result<(ChatMessage, bool), StorageError> {
        let sql = format!(
            "INSERT INTO messages (id, session_id, seq, role, content, status, client_message_id, \
             reply_to, context_json, attachments_json, created_at) \
             SELECT $1, $2, COALESCE(MAX(seq), 0) + 1, $3, $4, $5, $6, NULL, $7, $8, $9 \
             FROM messages WHERE session_id = $2 \
             ON CONFLICT (session_id, client_message_id) DO NOTHING RETURNING {MESSAGE_COLUMNS}"
        );
        let row: Option<MessageRow> = on_db!(self, write, |db, d| {
            let mut tx = db.begin().await?;
            lock_session!(d, tx, session_id);
            let row = sqlx::query_as(&sql)
                .bind(m.id)
                .bind(session_id)
                .bind(name(Role::User))
                .bind(m.content)
                .bind(name(MessageStatus::Complete))
                .bind(m.client_message_id)
                .bind(m.context.map(to_json))
                .bind((!m.attachments.is_empty()).then(|| to_json(&m.attachments)))
                .bind(m.created_at)
                .fetch_optional(&mut *tx)
                .await?;
            tx.commit().await?;
            row
        });
        match row {
            Some(row) => Ok((row.into(), false)),
            None => Ok((self.stored_instead(session_id, m).await?, true)),
        }
    }

    /// Starts a turn: marks the session used at `now` (as [`Store::touch_session`]), then stores
    /// user message `m` and after it an empty, streaming reply `reply_id` to it — one statement
    /// in one transaction, so both or neither are stored. When `m`'s `client_message_id` was
    /// stored before, stores nothing and returns that message without a reply.
    pub async fn insert_turn(
        &self,
        session_id: &str,
        m: &NewUserMessage<'_>,
        reply_id: &str,
        now: i64,
    ) -> Result<(ChatMessage, Option<ChatMessage>), StorageError> {
        self.store_turn(Opened::Stored(session_id), m, reply_id, now)
            .await
    }

    /// Stores session `session` with its first turn (as [`Store::insert_turn`]) in one
    /// transaction: a session whose first message is refused is never stored.
    pub async fn insert_first_turn(
        &self,
        session: &NewSession<'_>,
        m: &NewUserMessage<'_>,
        reply_id: &str,
    ) -> Result<(ChatMessage, ChatMessage), StorageError> {
        match self
            .store_turn(Opened::New(session), m, reply_id, session.created_at)
            .await?
        {
            (message, Some(reply)) => Ok((message, reply)),
            (message, None) => Err(StorageError::Corrupt(format!(
                "new session {}'s first message {} stored without its reply",
                session.id, message.id
            ))),
        }
    }

    async fn store_turn(
        &self,
        opened: Opened<'_, '_>,
        m: &NewUserMessage<'_>,
        reply_id: &str,
        now: i64,
    ) -> Result<(ChatMessage, Option<ChatMessage>), StorageError> {
        let session_id = match opened {
            Opened::Stored(id) => id,
            Opened::New(session) => session.id,
        };
        let sql = format!(
            "WITH next AS (SELECT COALESCE(MAX(seq), 0) AS seq FROM messages WHERE session_id = $1), \
             fresh AS (SELECT 1 AS one WHERE $4 IS NULL OR NOT EXISTS \
               (SELECT 1 FROM messages WHERE session_id = $1 AND client_message_id = $4)) \
             INSERT INTO messages (id, session_id, seq, role, content, status, client_message_id, \
               reply_to, context_json, attachments_json, created_at, producer) \
             SELECT $2, $1, next.seq + 1, '{user}', $3, '{complete}', $4, NULL, $5, $6, $7, NULL \
               FROM next, fresh \
             UNION ALL \
             SELECT $8, $1, next.seq + 2, '{assistant}', '', '{streaming}', NULL, $2, NULL, NULL, $7, $9 \
               FROM next, fresh \
             RETURNING {MESSAGE_COLUMNS}",
            user = name(Role::User),
            complete = name(MessageStatus::Complete),
            assistant = name(Role::Assistant),
            streaming = name(MessageStatus::Streaming),
        );
        let mut w = write::Write::default();
        match opened {
            // Nobody else sees the session before the commit, and it was just used.
            Opened::New(session) => insert_session(&mut w, session),
            Opened::Stored(_) => {
                // Nothing is inserted in the session between the check and the insert:
                // SQLite's one writer connection, PostgreSQL's lock on the session's row.
                if self.dialect() == Dialect::Postgres {
                    w.push(LOCK_SESSION, vec![session_id.into()]);
                }
                w.push(
                    TOUCH,
                    vec![now.into(), session_id.into(), (now - 60_000).into()],
                );
            }
        }
        let turn_at = w.push(
            sql,
            vec![
                session_id.into(),
                m.id.into(),
                m.content.into(),
                m.client_message_id.into(),
                m.context.map(to_json).into(),
                (!m.attachments.is_empty())
                    .then(|| to_json(&m.attachments))
                    .into(),
                m.created_at.into(),
                reply_id.into(),
                self.producer.as_deref().into(),
            ],
        );
        let rows = run_write!(self, w, |i, rows| match i == turn_at {
            true => messages(rows),
            false => Ok(Vec::new()),
        });
        let rows = rows.into_iter().flatten();
        let (mut message, mut reply) = (None, None);
        for row in rows {
            let row = ChatMessage::from(row);
            match row.role {
                Role::User => message = Some(row),
                _ => reply = Some(row),
            }
        }
        match (message, reply) {
            (Some(message), Some(reply)) => Ok((message, Some(reply))),
            (None, None) => Ok((self.stored_instead(session_id, m).await?, None)),
            _ => Err(StorageError::Corrupt(format!(
                "message {} stored without its reply",
                m.id
            ))),
        }
    }

    /// The message stored before with `m`'s `client_message_id` (an insert found it there).
    async fn stored_instead(
        &self,
        session_id: &str,
        m: &NewUserMessage<'_>,
    ) -> Result<ChatMessage, StorageError> {
        let cid = m
            .client_message_id
            .ok_or_else(|| StorageError::Corrupt(format!("message {} not inserted", m.id)))?;
        let stored = self.message_by_client_id(session_id, cid).await?;
        stored.ok_or_else(|| StorageError::Corrupt(format!("message {cid} vanished")))
    }

    /// Stores an `approval` message (the user's decisions about tool calls of the reply it answers
    /// to) after every message stored so far.
    pub async fn insert_approval(
        &self,
        session_id: &str,
        message: &ChatMessage,
    ) -> Result<(), StorageError> {
        let approvals = serde_json::to_string(&message.approvals)
            .map_err(|e| StorageError::Corrupt(e.to_string()))?;
        let sql = "INSERT INTO messages (id, session_id, seq, role, content, status, reply_to, \
             approvals_json, created_at) \
             SELECT $1, $2, COALESCE(MAX(seq), 0) + 1, $3, $4, $5, $6, $7, $8 \
             FROM messages WHERE session_id = $2";
        on_db!(self, write, |db, d| {
            let mut tx = db.begin().await?;
            lock_session!(d, tx, session_id);
            sqlx::query(sql)
                .bind(&message.id)
                .bind(session_id)
                .bind(name(Role::Approval))
                .bind(&message.content)
                .bind(name(MessageStatus::Complete))
                .bind(&message.reply_to)
                .bind(&approvals)
                .bind(message.created_at)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?
        });
        Ok(())
    }

    /// Resets a failed or stopped reply to empty and streaming, for a retry.
    pub async fn restart_reply(&self, session_id: &str, id: &str) -> Result<bool, StorageError> {
        let sql = "UPDATE messages SET content = '', status = $1, error_json = NULL, \
             usage_json = NULL, tool_rounds_json = NULL, producer = $7 \
             WHERE session_id = $2 AND id = $3 AND role = $4 AND status IN ($5, $6)";
        let done = on_db!(self, write, |db, d| {
            sqlx::query(sql)
                .bind(name(MessageStatus::Streaming))
                .bind(session_id)
                .bind(id)
                .bind(name(Role::Assistant))
                .bind(name(MessageStatus::Failed))
                .bind(name(MessageStatus::Stopped))
                .bind(self.producer.as_deref())
                .execute(db)
                .await?
                .rows_affected()
        });
        Ok(done == 1)
    }

    /// Writes a streaming reply's text and tool rounds so far (a crash keeps them); a reply that
    /// is no longer streaming is left as it is.
    pub async fn checkpoint_reply(
        &self,
        id: &str,
        content: &str,
        tool_rounds: &[ToolRound],
    ) -> Result<(), StorageError> {
        let sql =
            "UPDATE messages SET content = $1, tool_rounds_json = $2 WHERE id = $3 AND status = $4";
        on_db!(self, write, |db, d| {
            sqlx::query(sql)
                .bind(content)
                .bind((!tool_rounds.is_empty()).then(|| to_json(&tool_rounds)))
                .bind(id)
                .bind(name(MessageStatus::Streaming))
                .execute(db)
                .await?;
        });
        Ok(())
    }

    /// Stores the final state of a reply and returns it; with `spend` (the reply's last provider
    /// call), settles that call in the same transaction ([`Store::settle_tokens`]) and returns
    /// the session's total too. `None` for the reply when it is gone (its session deleted while
    /// it streamed): the spend is recorded all the same, so it must not be settled again.
    pub async fn finish_reply(
        &self,
        session_id: &str,
        id: &str,
        outcome: ReplyOutcome<'_>,
        spend: Option<Spend<'_>>,
    ) -> Result<(Option<ChatMessage>, Option<u64>), StorageError> {
        let sql = format!(
            "UPDATE messages SET content = $1, status = $2, usage_json = $3, \
             context_report_json = $4, tool_rounds_json = $5, error_json = $6 \
             WHERE session_id = $7 AND id = $8 RETURNING {MESSAGE_COLUMNS}"
        );
        let mut w = write::Write::default();
        let used_at = spend
            .as_ref()
            .map(|spend| settle(&mut w, session_id, spend));
        let reply_at = w.push(
            sql,
            vec![
                outcome.content.into(),
                name(outcome.status).into(),
                outcome.usage.as_ref().map(to_json).into(),
                outcome.receipt.map(to_json).into(),
                (!outcome.tool_rounds.is_empty())
                    .then(|| to_json(outcome.tool_rounds))
                    .into(),
                outcome.error.map(to_json).into(),
                session_id.into(),
                id.into(),
            ],
        );
        // A reply that is gone (its session deleted meanwhile) still spent its tokens.
        let each = run_write!(self, w, |i, rows| Ok(match i {
            i if Some(i) == used_at => (Some(tokens_used(rows)?), Vec::new()),
            i if i == reply_at => (None, messages(rows)?),
            _ => (None, Vec::new()),
        }));
        let (mut row, mut used) = (None, None);
        for (tokens, messages) in each {
            used = used.or(tokens);
            row = row.or(messages.into_iter().next());
        }
        Ok((row.map(ChatMessage::from), used))
    }

    /// A session's settings record (defaults when it never changed any).
    pub async fn settings(&self, session_id: &str) -> Result<SessionSettings, StorageError> {
        let sql = "SELECT settings_json FROM sessions WHERE id = $1";
        let raw: Option<Option<String>> = on_db!(self, read, |db, d| {
            sqlx::query_scalar(sql)
                .bind(session_id)
                .fetch_optional(db)
                .await?
        });
        Ok(from_json("settings_json", raw.flatten())?.unwrap_or_default())
    }

    /// Changes a session's settings record: `change` sees the stored record and edits it; when it
    /// returns `Ok`, the record is written in the same transaction (no change is lost to a
    /// concurrent one). Returns `change`'s value and the record as stored.
    pub async fn update_settings<R, E>(
        &self,
        session_id: &str,
        change: impl FnOnce(&mut SessionSettings) -> Result<R, E>,
    ) -> Result<(R, SessionSettings), E>
    where
        E: From<StorageError>,
    {
        on_db!(self, write, |db, d| {
            let mut tx = db.begin().await.map_err(StorageError::from)?;
            let raw: Option<Option<String>> = sqlx::query_scalar(&format!(
                "SELECT settings_json FROM sessions WHERE id = $1{}",
                d.for_update()
            ))
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(StorageError::from)?;
            let mut settings: SessionSettings =
                from_json("settings_json", raw.flatten())?.unwrap_or_default();
            let value = change(&mut settings)?;
            settings.version = glassbox_core::context::settings::SETTINGS_VERSION;
            sqlx::query("UPDATE sessions SET settings_json = $1 WHERE id = $2")
                .bind(to_json(&settings))
                .bind(session_id)
                .execute(&mut *tx)
                .await
                .map_err(StorageError::from)?;
            tx.commit().await.map_err(StorageError::from)?;
            Ok((value, settings))
        })
    }

    /// A cached summary of messages `first..=last` whose contents hash to `content_hash`.
    pub async fn summary(
        &self,
        session_id: &str,
        first: &str,
        last: &str,
        content_hash: &str,
    ) -> Result<Option<String>, StorageError> {
        let sql = "SELECT summary FROM summaries WHERE session_id = $1 AND first_message_id = $2 \
             AND last_message_id = $3 AND content_hash = $4";
        Ok(on_db!(self, read, |db, d| {
            sqlx::query_scalar(sql)
                .bind(session_id)
                .bind(first)
                .bind(last)
                .bind(content_hash)
                .fetch_optional(db)
                .await?
        }))
    }

    /// Caches a summary (a concurrent identical write is a no-op).
    pub async fn put_summary(
        &self,
        session_id: &str,
        (first, last, content_hash): (&str, &str, &str),
        summary: &str,
        created_at: i64,
    ) -> Result<(), StorageError> {
        let sql = "INSERT INTO summaries (session_id, first_message_id, last_message_id, \
             content_hash, summary, created_at) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT DO NOTHING";
        on_db!(self, write, |db, d| {
            sqlx::query(sql)
                .bind(session_id)
                .bind(first)
                .bind(last)
                .bind(content_hash)
                .bind(summary)
                .bind(created_at)
                .execute(db)
                .await?;
        });
        Ok(())
    }

    /// Every message of a session, oldest first.
    pub async fn messages(&self, session_id: &str) -> Result<Vec<ChatMessage>, StorageError> {
        let sql =
            format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = $1 ORDER BY seq");
        let rows: Vec<MessageRow> = on_db!(self, read, |db, d| {
            sqlx::query_as(&sql).bind(session_id).fetch_all(db).await?
        });
        Ok(rows.into_iter().map(ChatMessage::from).collect())
    }

    /// The session's messages, oldest first, with only what topics and the filter read: id, role,
    /// text, status, time and mark (the JSON parts, receipts among them, are left at their
    /// defaults and not decoded).
    pub async fn message_texts(&self, session_id: &str) -> Result<Vec<ChatMessage>, StorageError> {
        let sql = format!(
            "SELECT {MESSAGE_TEXT_COLUMNS} FROM messages WHERE session_id = $1 ORDER BY seq"
        );
        let rows: Vec<MessageTextRow> = on_db!(self, read, |db, d| {
            sqlx::query_as(&sql).bind(session_id).fetch_all(db).await?
        });
        Ok(rows.into_iter().map(ChatMessage::from).collect())
    }

    /// A page of [`Store::message_texts`] read from the newest end: at most `limit` messages
    /// before position `before` (`i64::MAX`: from the newest), newest first, each with its
    /// position (the next page ends before the last one), over a range of positions as a turn's
    /// pages are.
    pub async fn message_texts_before(
        &self,
        session_id: &str,
        before: i64,
        limit: i64,
    ) -> Result<Vec<(i64, ChatMessage)>, StorageError> {
        let sql = format!(
            "{page_end} SELECT seq, {MESSAGE_TEXT_COLUMNS} FROM messages \
             WHERE session_id = $1 AND {in_page} ORDER BY seq DESC LIMIT $3",
            page_end = history::page_end(None, "$2"),
            in_page = history::in_page("$3"),
        );
        let rows: Vec<PlacedTextRow> = on_db!(self, read, |db, d| {
            sqlx::query_as(&sql)
                .bind(session_id)
                .bind(before)
                .bind(limit)
                .fetch_all(db)
                .await?
        });
        Ok(rows.into_iter().map(|r| (r.seq, r.text.into())).collect())
    }

    /// Sets or clears a message's mark; false when the session has no such message.
    pub async fn set_mark(
        &self,
        session_id: &str,
        message_id: &str,
        mark: Option<MessageMark>,
    ) -> Result<bool, StorageError> {
        let sql = "UPDATE messages SET mark = $1 WHERE session_id = $2 AND id = $3";
        let done = on_db!(self, write, |db, d| {
            sqlx::query(sql)
                .bind(mark.map(name))
                .bind(session_id)
                .bind(message_id)
                .execute(db)
                .await?
                .rows_affected()
        });
        Ok(done > 0)
    }

    /// The session's topics as last extracted.
    pub async fn topics(&self, session_id: &str) -> Result<Option<SessionTopics>, StorageError> {
        let sql = "SELECT topics_json FROM session_topics WHERE session_id = $1";
        let raw: Option<String> = on_db!(self, read, |db, d| {
            sqlx::query_scalar(sql)
                .bind(session_id)
                .fetch_optional(db)
                .await?
        });
        from_json("topics_json", raw)
    }

    /// A session's settings record and its topics, read together (one statement, one snapshot):
    /// what planning a turn starts from.
    pub async fn settings_and_topics(
        &self,
        session_id: &str,
    ) -> Result<(SessionSettings, Option<SessionTopics>), StorageError> {
        let sql = "SELECT s.settings_json, t.topics_json FROM sessions s \
             LEFT JOIN session_topics t ON t.session_id = s.id WHERE s.id = $1";
        let raw: Option<(Option<String>, Option<String>)> = on_db!(self, read, |db, d| {
            sqlx::query_as(sql)
                .bind(session_id)
                .fetch_optional(db)
                .await?
        });
        let (settings, topics) = raw.unwrap_or_default();
        Ok((
            from_json("settings_json", settings)?.unwrap_or_default(),
            from_json("topics_json", topics)?,
        ))
    }

    /// Stores an extraction's topics unless a newer one (a higher generation) is stored already;
    /// true when written. One statement, so two extractions finishing together cannot both win.
    pub async fn put_topics(
        &self,
        session_id: &str,
        topics: &SessionTopics,
    ) -> Result<bool, StorageError> {
        let generation = i64::try_from(topics.generation).unwrap_or(i64::MAX);
        let done = on_db!(self, write, |db, d| {
            let mut tx = db.begin().await?;
            // A session deleted meanwhile: no topics written (not a broken reference).
            lock_session!(d, tx, session_id);
            let done = sqlx::query(PUT_TOPICS)
                .bind(session_id)
                .bind(generation)
                .bind(to_json(topics))
                .bind(crate::ids::now_ms())
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            done
        });
        Ok(done > 0)
    }

    /// Stores an extraction's topics as [`Store::put_topics`] does and, when they are written,
    /// changes the session's settings in the same transaction: `change` sees the topics they
    /// replace (`None`: the first) and the settings record, which is written after it. A turn
    /// therefore never reads the new topics with a filter that names the old ones. Returns
    /// `change`'s value when the topics were written.
    pub async fn put_topics_and_settings<R>(
        &self,
        session_id: &str,
        topics: &SessionTopics,
        change: impl FnOnce(Option<&SessionTopics>, &mut SessionSettings) -> R,
    ) -> Result<Option<R>, StorageError> {
        let generation = i64::try_from(topics.generation).unwrap_or(i64::MAX);
        on_db!(self, write, |db, d| {
            let mut tx = db.begin().await?;
            // The session's row first, then its topics: the order every writer takes them in.
            let raw: Option<Option<String>> = sqlx::query_scalar(&format!(
                "SELECT settings_json FROM sessions WHERE id = $1{}",
                d.for_update()
            ))
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await?;
            let replaced: Option<String> =
                sqlx::query_scalar("SELECT topics_json FROM session_topics WHERE session_id = $1")
                    .bind(session_id)
                    .fetch_optional(&mut *tx)
                    .await?;
            let replaced: Option<SessionTopics> = from_json("topics_json", replaced)?;
            let written = sqlx::query(PUT_TOPICS)
                .bind(session_id)
                .bind(generation)
                .bind(to_json(topics))
                .bind(crate::ids::now_ms())
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if written == 0 {
                return Ok(None);
            }
            let mut settings: SessionSettings =
                from_json("settings_json", raw.flatten())?.unwrap_or_default();
            let value = change(replaced.as_ref(), &mut settings);
            settings.version = glassbox_core::context::settings::SETTINGS_VERSION;
            sqlx::query("UPDATE sessions SET settings_json = $1 WHERE id = $2")
                .bind(to_json(&settings))
                .bind(session_id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(Some(value))
        })
    }

    /// The messages of a session up to and including `last_id`, oldest first.
    pub async fn history_through(
        &self,
        session_id: &str,
        last_id: &str,
    ) -> Result<Vec<ChatMessage>, StorageError> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = $1 \
             AND seq <= (SELECT seq FROM messages WHERE session_id = $1 AND id = $2) ORDER BY seq"
        );
        let rows: Vec<MessageRow> = on_db!(self, read, |db, d| {
            sqlx::query_as(&sql)
                .bind(session_id)
                .bind(last_id)
                .fetch_all(db)
                .await?
        });
        Ok(rows.into_iter().map(ChatMessage::from).collect())
    }

    /// One message of a session.
    pub async fn message(
        &self,
        session_id: &str,
        id: &str,
    ) -> Result<Option<ChatMessage>, StorageError> {
        let sql =
            format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = $1 AND id = $2");
        let row: Option<MessageRow> = on_db!(self, read, |db, d| {
            sqlx::query_as(&sql)
                .bind(session_id)
                .bind(id)
                .fetch_optional(db)
                .await?
        });
        Ok(row.map(ChatMessage::from))
    }

    async fn message_by_client_id(
        &self,
        session_id: &str,
        cid: &str,
    ) -> Result<Option<ChatMessage>, StorageError> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = $1 \
             AND client_message_id = $2"
        );
        // The writer: the message may have been stored a moment ago.
        let row: Option<MessageRow> = on_db!(self, write, |db, d| {
            sqlx::query_as(&sql)
                .bind(session_id)
                .bind(cid)
                .fetch_optional(db)
                .await?
        });
        Ok(row.map(ChatMessage::from))
    }
}

impl Store {
    /// Cached vectors of `model` for those of `keys` that have one.
    pub async fn cached_embeddings(
        &self,
        model: &str,
        keys: &[String],
    ) -> Result<std::collections::HashMap<String, Vec<f32>>, StorageError> {
        let mut found = std::collections::HashMap::new();
        // Bounded IN lists keep every statement well under the databases' parameter limits.
        for chunk in keys.chunks(IDS_PER_STATEMENT) {
            let sql = format!(
                "SELECT cache_key, vector FROM embedding_cache WHERE model = $1 \
                 AND cache_key IN ({})",
                params(2, chunk.len())
            );
            let rows: Vec<EmbeddingRow> = on_db!(self, read, |db, d| {
                let mut query = sqlx::query_as(&sql).bind(model);
                for key in chunk {
                    query = query.bind(key);
                }
                query.fetch_all(db).await?
            });
            for row in rows {
                found.insert(row.cache_key, row.vector.0);
            }
        }
        Ok(found)
    }

    /// Stores vectors of `model` under their keys (an existing key keeps its vector).
    pub async fn put_embeddings(
        &self,
        model: &str,
        items: &[(String, Vec<f32>)],
    ) -> Result<(), StorageError> {
        let sql = "INSERT INTO embedding_cache (model, cache_key, vector) VALUES ($1, $2, $3) \
             ON CONFLICT (model, cache_key) DO NOTHING";
        // In key order: two writers of overlapping keys take their locks in the same order.
        let mut items: Vec<&(String, Vec<f32>)> = items.iter().collect();
        items.sort_by(|a, b| a.0.cmp(&b.0));
        on_db!(self, write, |db, d| {
            let mut tx = db.begin().await?;
            for (key, vector) in &items {
                sqlx::query(sql)
                    .bind(model)
                    .bind(key)
                    .bind(Vector::to_bytes(vector))
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?
        });
        Ok(())
    }

    /// Deletes the cached vectors of `model` under `keys` (an agent item that changed).
    pub async fn delete_embeddings(
        &self,
        model: &str,
        keys: &[String],
    ) -> Result<(), StorageError> {
        on_db!(self, write, |db, d| {
            let mut tx = db.begin().await?;
            for chunk in keys.chunks(IDS_PER_STATEMENT) {
                let sql = format!(
                    "DELETE FROM embedding_cache WHERE model = $1 AND cache_key IN ({})",
                    params(2, chunk.len())
                );
                let mut query = sqlx::query(&sql).bind(model);
                for key in chunk {
                    query = query.bind(key);
                }
                query.execute(&mut *tx).await?;
            }
            tx.commit().await?
        });
        Ok(())
    }
}

/// The session a turn is stored in: one stored before, or a new one stored with it.
#[derive(Clone, Copy)]
enum Opened<'s, 'a> {
    Stored(&'s str),
    New(&'s NewSession<'a>),
}

/// Marks a session (`$2`) used at `$1`, at most once a minute (`$3`: a minute before `$1`).
const TOUCH: &str = "UPDATE sessions SET last_active_at = $1 WHERE id = $2 AND last_active_at < $3";

/// Writes a session's topics (`$1`, generation `$2`, JSON `$3`, at `$4`) unless a newer
/// generation is stored (or the session is gone).
const PUT_TOPICS: &str = "INSERT INTO session_topics (session_id, generation, topics_json, \
     updated_at) SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM sessions WHERE id = $1) \
     ON CONFLICT (session_id) DO UPDATE SET generation = excluded.generation, \
     topics_json = excluded.topics_json, updated_at = excluded.updated_at \
     WHERE excluded.generation > session_topics.generation";

fn to_json<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

fn from_json<T: serde::de::DeserializeOwned>(
    col: &str,
    raw: Option<String>,
) -> Result<Option<T>, StorageError> {
    raw.map(|s| serde_json::from_str(&s).map_err(|e| StorageError::Corrupt(format!("{col}: {e}"))))
        .transpose()
}
