//! Reading a long session's history in pieces, for a turn that reads only what it can use
//! (docs/context-planning.md, "A turn"): its newest messages a page at a time, the memories
//! (pinned messages, standing instructions) among the older ones, and how many older ones reach
//! the model.

use glassbox_core::context::MessageMark;
use glassbox_core::vocab::{MessageStatus, Role};
use glassbox_core::wire::ChatMessage;

use super::named::name;
use super::rows::PlacedRow;
use super::{Dialect, StorageError, Store, on_db, params};

/// Where a page of history ends.
#[derive(Debug, Clone, Copy)]
pub enum PageEnd<'a> {
    /// Before this position (`i64::MAX`: from the newest).
    Before(i64),
    /// With the message of this id.
    Through(&'a str),
}

/// The messages older than what a turn read that reach the model: how many, and the ids of the
/// oldest and the newest of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unread {
    pub count: i64,
    pub first_id: String,
    pub last_id: String,
}

/// A message's columns as a turn reads history: what the plan and the request use (text, role,
/// status, attachments, tool rounds, mark, page context), not what only the widget shows
/// (receipt, usage, error, approvals), which are read as empty.
const HISTORY_COLUMNS: &str = "id, role, content, status, created_at, client_message_id, \
     reply_to, context_json, attachments_json, NULL AS usage_json, NULL AS context_report_json, \
     tool_rounds_json, NULL AS error_json, mark, NULL AS approvals_json";

/// `ChatMessage::reaches_model` in SQL: user messages, complete replies, stopped replies with
/// text (the names are the store's own, written into the statement).
fn reaches(d: Dialect) -> String {
    format!(
        "(role = '{user}' OR (role = '{assistant}' AND (status = '{complete}' \
         OR (status = '{stopped}' AND {trimmed} <> ''))))",
        user = name(Role::User),
        assistant = name(Role::Assistant),
        complete = name(MessageStatus::Complete),
        stopped = name(MessageStatus::Stopped),
        trimmed = d.trimmed("content"),
    )
}

/// `WITH page_end`: where a page of session `$1`'s history ends, the position after the message
/// whose id is `through` (when given and found), else `before` or after the newest, whichever
/// comes first. For [`in_page`].
pub(super) fn page_end(through: Option<&str>, before: &str) -> String {
    let newest = format!(
        "(SELECT CASE WHEN MAX(seq) + 1 > {before} THEN {before} ELSE MAX(seq) + 1 END \
         FROM messages WHERE session_id = $1)"
    );
    let end = match through {
        Some(id) => format!(
            "COALESCE((SELECT seq + 1 FROM messages WHERE session_id = $1 AND id = {id}), {newest})"
        ),
        None => newest,
    };
    format!("WITH page_end AS (SELECT {end} AS seq)")
}

/// The `limit` positions before [`page_end`]: a page is a range, not the whole session ordered
/// and cut (positions have no gaps), so no plan reads more than the page. Ordered and cut alone,
/// PostgreSQL's planner read and sorted a whole 10,210-message session for a page of 64 (14 ms)
/// when its statistics had the session short.
pub(super) fn in_page(limit: &str) -> String {
    format!("seq < (SELECT seq FROM page_end) AND seq >= (SELECT seq FROM page_end) - {limit}")
}

/// The settled messages that do not reach the model (failed replies, stopped ones without text,
/// approvals): the predicate of the partial index `messages_not_reaching` (each dialect's
/// migration has it word for word, so the database uses the index; a test keeps them equal).
///
/// A streaming reply is left out: every reply starts as one, and on PostgreSQL the update that
/// finishes it cannot be a heap-only update (its status is in the predicate), so each reply would
/// leave a dead entry behind in the index until vacuum, and counting a long session would visit
/// thousands of them (measured: 5,084 heap fetches, 5 ms, for a 10,000-message session).
fn settled_not_reaching(d: Dialect) -> String {
    format!(
        "status <> '{streaming}' AND NOT {reaches}",
        streaming = name(MessageStatus::Streaming),
        reaches = reaches(d),
    )
}

impl Store {
    /// Where message `id` is in its session (`None`: no such message).
    pub async fn position(&self, session_id: &str, id: &str) -> Result<Option<i64>, StorageError> {
        let sql = "SELECT seq FROM messages WHERE session_id = $1 AND id = $2";
        Ok(on_db!(self, read, |db, d| {
            sqlx::query_scalar(sql)
                .bind(session_id)
                .bind(id)
                .fetch_optional(db)
                .await?
        }))
    }

    /// At most `limit` messages (as a turn reads them) that end a page at `end`, newest first,
    /// each with its position. One query either way (`Through` finds the message's position in
    /// it; an unknown id reads nothing), over a range of positions ([`in_page`]).
    pub async fn messages_before(
        &self,
        session_id: &str,
        end: PageEnd<'_>,
        limit: i64,
    ) -> Result<Vec<(i64, ChatMessage)>, StorageError> {
        let (before, through) = match end {
            PageEnd::Before(before) => (before, None),
            PageEnd::Through(id) => (0, Some(id)),
        };
        let sql = format!(
            "{page_end} SELECT seq, {HISTORY_COLUMNS} FROM messages \
             WHERE session_id = $1 AND {in_page} ORDER BY seq DESC LIMIT $4",
            page_end = page_end(Some("$3"), "$2"),
            in_page = in_page("$4"),
        );
        let rows: Vec<PlacedRow> = on_db!(self, read, |db, d| {
            sqlx::query_as(&sql)
                .bind(session_id)
                .bind(before)
                .bind(through)
                .bind(limit)
                .fetch_all(db)
                .await?
        });
        Ok(rows
            .into_iter()
            .map(|r| (r.seq, r.message.into()))
            .collect())
    }

    /// The memories before position `before` that reach the model, oldest first: the newest
    /// `limit` pinned messages and those with `standing` ids (standing instructions). Two lookups
    /// by index (`messages_pinned`, then the ids), never a scan of the older messages.
    pub async fn memories_before(
        &self,
        session_id: &str,
        before: i64,
        standing: &[String],
        limit: i64,
    ) -> Result<Vec<ChatMessage>, StorageError> {
        let mut rows: Vec<PlacedRow> = on_db!(self, read, |db, d| {
            let pinned_sql = format!(
                "SELECT seq, {HISTORY_COLUMNS} FROM messages \
                 WHERE session_id = $1 AND seq < $2 AND mark = '{pinned}' AND {reaches} \
                 ORDER BY seq DESC LIMIT $3",
                pinned = name(MessageMark::Pinned),
                reaches = reaches(d),
            );
            sqlx::query_as(&pinned_sql)
                .bind(session_id)
                .bind(before)
                .bind(limit)
                .fetch_all(db)
                .await?
        });
        // Each standing id looked up by its key (few: a session's standing instructions).
        for chunk in standing.chunks(super::IDS_PER_STATEMENT) {
            let found: Vec<PlacedRow> = on_db!(self, read, |db, d| {
                let standing_sql = format!(
                    "SELECT seq, {HISTORY_COLUMNS} FROM messages \
                     WHERE id IN ({ids}) AND session_id = $1 AND seq < $2 AND {reaches}",
                    ids = params(3, chunk.len()),
                    reaches = reaches(d),
                );
                let mut query = sqlx::query_as(&standing_sql).bind(session_id).bind(before);
                for id in chunk {
                    query = query.bind(id);
                }
                query.fetch_all(db).await?
            });
            rows.extend(found);
        }
        // Not cut after merging: the plan protects pinned messages first (at most `limit` of
        // them), and the standing ids are few.
        rows.sort_by_key(|r| r.seq);
        rows.dedup_by_key(|r| r.seq);
        Ok(rows.into_iter().map(|r| r.message.into()).collect())
    }

    /// The messages before position `before` that reach the model (`None`: there are none).
    /// Counted as every message before it (a session's positions run from its first without
    /// gaps: messages are never deleted one by one) less the settled ones that do not reach the
    /// model (index `messages_not_reaching`, few): no read grows with the session. A reply still
    /// streaming there (left by an instance that died, until it is marked failed) is counted
    /// among those that reach the model; the session's own streaming reply is among the pages a
    /// turn read.
    pub async fn unread_before(
        &self,
        session_id: &str,
        before: i64,
    ) -> Result<Option<Unread>, StorageError> {
        let (first_seq, not_reaching, first, last): (
            Option<i64>,
            i64,
            Option<String>,
            Option<String>,
        ) = on_db!(self, read, |db, d| {
            let reaches = reaches(d);
            let not_reaching = settled_not_reaching(d);
            // The oldest and the newest that reach the model, found by walking position by
            // position from each end (`ok`: it reaches; the walk stops there), so each step is
            // one lookup by key whatever the planner thinks of the session's size.
            let sql = format!(
                "WITH RECURSIVE \
                 up(seq, id, ok) AS ( \
                   SELECT seq, id, {reaches} FROM messages WHERE session_id = $1 AND seq < $2 \
                     AND seq = (SELECT MIN(seq) FROM messages WHERE session_id = $1) \
                   UNION ALL \
                   SELECT m.seq, m.id, {reaches} FROM up JOIN messages m \
                     ON m.session_id = $1 AND m.seq = up.seq + 1 WHERE NOT up.ok AND m.seq < $2), \
                 down(seq, id, ok) AS ( \
                   SELECT seq, id, {reaches} FROM messages WHERE session_id = $1 \
                     AND seq = (SELECT CASE WHEN MAX(seq) < $2 - 1 THEN MAX(seq) ELSE $2 - 1 END \
                       FROM messages WHERE session_id = $1) \
                   UNION ALL \
                   SELECT m.seq, m.id, {reaches} FROM down JOIN messages m \
                     ON m.session_id = $1 AND m.seq = down.seq - 1 WHERE NOT down.ok) \
                 SELECT (SELECT MIN(seq) FROM messages WHERE session_id = $1), \
                 (SELECT COUNT(*) FROM messages WHERE session_id = $1 AND seq < $2 \
                   AND {not_reaching}), \
                 (SELECT id FROM up WHERE ok), \
                 (SELECT id FROM down WHERE ok)"
            );
            sqlx::query_as(&sql)
                .bind(session_id)
                .bind(before)
                .fetch_one(db)
                .await?
        });
        let count = first_seq.map_or(0, |f| (before - f).max(0)) - not_reaching;
        Ok(match (first, last) {
            (Some(first_id), Some(last_id)) if count > 0 => Some(Unread {
                count,
                first_id,
                last_id,
            }),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    // What a turn reads of history is checked on every backend by the storage contract
    // (server/tests/storage.rs).

    /// Each dialect's index predicate is the count's, word for word, so the database uses it.
    #[test]
    fn the_predicate_is_the_index_s() {
        let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        for (migration, d) in [
            (
                include_str!("../../migrations/sqlite/0015_settled_not_reaching.sql"),
                super::Dialect::Sqlite,
            ),
            (
                include_str!("../../migrations/postgres/0005_settled_not_reaching.sql"),
                super::Dialect::Postgres,
            ),
        ] {
            let predicate = super::settled_not_reaching(d);
            assert!(
                squash(migration).contains(&format!("WHERE {};", squash(&predicate))),
                "{predicate}"
            );
        }
    }
}
