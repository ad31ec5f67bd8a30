//! A write of several statements in one transaction, described as data ([`Write`]) and run by
//! each backend its own way: on SQLite in one round trip to the writer connection's thread, on
//! PostgreSQL statement by statement in a transaction.
//!
//! sqlx runs each statement on SQLite, and each `BEGIN` and `COMMIT`, as a round trip to the
//! thread that owns the connection: two thread wake-ups, ~30 µs each on a 2-core machine. A turn's
//! first write (the session's use, the user message and the reply's placeholder) and its last (the
//! reply and its spend) took four and five of them, a third of the time the server added to a
//! reply (`cargo xtask bench gateway`). Here their statements go as one query string between
//! `BEGIN IMMEDIATE` and `COMMIT`, each statement's `$1`… renumbered to follow the one before
//! (outside quotes). sqlx's SQLite driver runs such a string statement by statement, binding `$N`
//! by number; sqlx 0.8 marks several statements in one query as deprecated
//! (launchbadge/sqlx#3108), and this module's tests fail if an upgrade drops it.

use std::borrow::Cow;

use futures::TryStreamExt as _;
use sqlx::Either;
use sqlx::postgres::{PgPool, PgRow};
use sqlx::sqlite::{SqliteArguments, SqlitePool, SqliteRow};
use sqlx::{Arguments as _, Executor as _};

/// A value bound to a statement's parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Value {
    Text(Option<String>),
    Int(Option<i64>),
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(Some(v.to_owned()))
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(Some(v))
    }
}

impl From<Option<&str>> for Value {
    fn from(v: Option<&str>) -> Self {
        Value::Text(v.map(str::to_owned))
    }
}

impl From<Option<String>> for Value {
    fn from(v: Option<String>) -> Self {
        Value::Text(v)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(Some(v))
    }
}

/// One statement and the values of its parameters `$1`, `$2`, … in order.
#[derive(Debug, Clone)]
struct Statement {
    sql: Cow<'static, str>,
    values: Vec<Value>,
}

/// Statements that commit together or not at all; the write answers the rows each returned.
#[derive(Debug, Clone, Default)]
pub(super) struct Write {
    statements: Vec<Statement>,
}

impl Write {
    /// Appends `sql` with the values of its parameters `$1`…`$n`, in order; answers the
    /// statement's place, where the write's answer has its rows.
    pub fn push(&mut self, sql: impl Into<Cow<'static, str>>, values: Vec<Value>) -> usize {
        let sql = sql.into();
        // Too few values would take the next statement's on SQLite, and fail on PostgreSQL; a
        // statement that is none or two (or has a comment, whose quotes renumbering would misread)
        // would shift every later statement's rows.
        debug_assert_eq!(highest_param(&sql), values.len(), "{sql}");
        debug_assert!(
            !sql.trim().is_empty()
                && !sql.contains(';')
                && !sql.contains("--")
                && !sql.contains("/*"),
            "one statement without comments: {sql}"
        );
        self.statements.push(Statement { sql, values });
        self.statements.len() - 1
    }

    /// Runs the write on SQLite's writer: one query string, one round trip; answers each
    /// statement's rows. It runs in a task of its own, so a caller that goes away (a client
    /// hanging up) cannot cut it between two statements: it commits whole or, when a statement
    /// fails, rolls back those before it.
    pub async fn run_sqlite(self, writer: &SqlitePool) -> Result<Vec<Vec<SqliteRow>>, sqlx::Error> {
        let statements = self.statements.len();
        let (sql, args) = self.sqlite_batch()?;
        let writer = writer.clone();
        let ran = tokio::spawn(async move {
            let mut conn = writer.acquire().await?;
            // Every statement's end is read (a `fetch_one` would stop before `COMMIT`).
            #[allow(deprecated)]
            let each = sqlx::query_with(&sql, args)
                .fetch_many(&mut *conn)
                .try_fold(vec![Vec::new()], |mut each, step| async move {
                    match step {
                        // A statement ended: the next one's rows follow.
                        Either::Left(_) => each.push(Vec::new()),
                        Either::Right(row) => each.last_mut().map_or((), |rows| rows.push(row)),
                    }
                    Ok(each)
                })
                .await;
            if each.is_err() && conn.execute("ROLLBACK").await.is_err() {
                // In no state to be trusted with the next write.
                conn.close_on_drop();
            }
            each
        })
        .await
        .map_err(|e| match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => sqlx::Error::WorkerCrashed,
        })??;
        // Before `BEGIN`'s end (none), then each statement's rows, then `COMMIT`'s, then after it.
        if ran.len() != statements + 3 {
            return Err(sqlx::Error::Protocol(format!(
                "a write of {statements} statements ended {} of them",
                ran.len().saturating_sub(3)
            )));
        }
        Ok(ran.into_iter().skip(1).take(statements).collect())
    }

    /// The query string (`BEGIN IMMEDIATE; …; COMMIT`) and its arguments.
    fn sqlite_batch(self) -> Result<(String, SqliteArguments<'static>), sqlx::Error> {
        let mut sql = String::from("BEGIN IMMEDIATE;\n");
        let mut args = SqliteArguments::default();
        for statement in self.statements {
            sql.push_str(&renumber(&statement.sql, args.len()));
            sql.push_str(";\n");
            for value in statement.values {
                match value {
                    Value::Text(v) => args.add(v),
                    Value::Int(v) => args.add(v),
                }
                .map_err(sqlx::Error::Encode)?;
            }
        }
        sql.push_str("COMMIT;");
        Ok((sql, args))
    }

    /// Runs the write on PostgreSQL: its statements in a transaction (a single one alone);
    /// answers each statement's rows. A caller that goes away rolls it back (sqlx's transaction).
    pub async fn run_postgres(self, pool: &PgPool) -> Result<Vec<Vec<PgRow>>, sqlx::Error> {
        if let [statement] = &self.statements[..] {
            return Ok(vec![postgres_query(statement).fetch_all(pool).await?]);
        }
        let mut each = Vec::with_capacity(self.statements.len());
        let mut tx = pool.begin().await?;
        for statement in &self.statements {
            each.push(postgres_query(statement).fetch_all(&mut *tx).await?);
        }
        tx.commit().await?;
        Ok(each)
    }
}

fn postgres_query(
    statement: &Statement,
) -> sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let mut query = sqlx::query(&statement.sql);
    for value in &statement.values {
        query = match value {
            Value::Text(v) => query.bind(v.as_deref()),
            Value::Int(v) => query.bind(*v),
        };
    }
    query
}

/// `sql` with each parameter `$n` written `$(n + by)`; what is quoted (`'…'`, `"…"`) is kept.
fn renumber(sql: &str, by: usize) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    each_param(sql, |piece| match piece {
        Piece::Text(text) => out.push_str(text),
        Piece::Param(n) => {
            out.push('$');
            out.push_str(&(n + by).to_string());
        }
    });
    out
}

/// The highest `$n` in `sql` (0 for none).
fn highest_param(sql: &str) -> usize {
    let mut highest = 0;
    each_param(sql, |piece| {
        if let Piece::Param(n) = piece {
            highest = highest.max(n);
        }
    });
    highest
}

enum Piece<'a> {
    Text(&'a str),
    Param(usize),
}

/// Walks `sql` as text and `$n` parameters, outside quotes.
fn each_param<'a>(sql: &'a str, mut on: impl FnMut(Piece<'a>)) {
    let bytes = sql.as_bytes();
    let (mut from, mut i, mut quote) = (0, 0, None);
    while i < bytes.len() {
        match (quote, bytes[i]) {
            (Some(q), b) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b @ (b'\'' | b'"')) => quote = Some(b),
            (None, b'$') => {
                let digits = bytes[i + 1..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                if let Ok(n) = sql[i + 1..i + 1 + digits].parse::<usize>() {
                    on(Piece::Text(&sql[from..i]));
                    on(Piece::Param(n));
                    from = i + 1 + digits;
                    i = from;
                    continue;
                }
            }
            (None, _) => {}
        }
        i += 1;
    }
    on(Piece::Text(&sql[from..]));
}

#[cfg(test)]
mod tests {
    use sqlx::Row as _;
    use sqlx::sqlite::SqlitePoolOptions;

    use super::*;

    #[test]
    fn parameters_are_renumbered_to_follow_the_statements_before() {
        assert_eq!(
            renumber("a = $1 AND b = $12, $1", 3),
            "a = $4 AND b = $15, $4"
        );
        assert_eq!(renumber("a = $1", 0), "a = $1");
        assert_eq!(renumber("no parameters", 5), "no parameters");
        assert_eq!(renumber("a lone $ sign", 5), "a lone $ sign");
        assert_eq!(
            renumber("x = '$1' AND \"$2\" = $1", 2),
            "x = '$1' AND \"$2\" = $3"
        );
        assert_eq!(highest_param("VALUES ($1, $3, $3, '$9')"), 3);
        assert_eq!(highest_param("none"), 0);
    }

    async fn pool() -> SqlitePool {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect("sqlite::memory:")
            .await
            .unwrap();
        sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, n BIGINT)")
            .execute(&pool)
            .await
            .unwrap();
        pool
    }

    #[tokio::test]
    async fn a_sqlite_write_runs_its_statements_together_and_answers_their_rows() {
        let pool = pool().await;
        let mut w = Write::default();
        w.push(
            "INSERT INTO t (name, n) VALUES ($1, $2)",
            vec!["a".into(), 1.into()],
        );
        w.push(
            "INSERT INTO t (name, n) VALUES ($2, $1) RETURNING name, n",
            vec![2.into(), "b".into()],
        );
        w.push(
            "UPDATE t SET n = n + $1 WHERE name = $2 RETURNING name, n",
            vec![10.into(), "a".into()],
        );
        let each = w.run_sqlite(&pool).await.unwrap();
        let got: Vec<Vec<(String, i64)>> = each
            .iter()
            .map(|rows| rows.iter().map(|r| (r.get("name"), r.get("n"))).collect())
            .collect();
        assert_eq!(
            got,
            [
                vec![],
                vec![("b".to_owned(), 2)],
                vec![("a".to_owned(), 11)]
            ]
        );
    }

    #[tokio::test]
    async fn a_failing_statement_undoes_the_write_and_the_next_one_still_commits() {
        let pool = pool().await;
        let mut w = Write::default();
        w.push("INSERT INTO t (name) VALUES ($1)", vec!["a".into()]);
        // The same name again: the second statement fails, the first is rolled back.
        w.push("INSERT INTO t (name) VALUES ($1)", vec!["a".into()]);
        assert!(w.run_sqlite(&pool).await.is_err());
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM t")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(count, 0);
        let mut w = Write::default();
        w.push(
            "INSERT INTO t (name, n) VALUES ($1, $2)",
            vec!["c".into(), Value::Int(None)],
        );
        w.run_sqlite(&pool).await.unwrap();
        let names: Vec<String> = sqlx::query_scalar("SELECT name FROM t")
            .fetch_all(&pool)
            .await
            .unwrap();
        assert_eq!(names, ["c"]);
    }

    #[tokio::test]
    async fn a_write_whose_caller_goes_away_still_ends() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("t.db").display());
        let (writer, other) = (
            SqlitePoolOptions::new()
                .max_connections(1)
                .connect(&url)
                .await
                .unwrap(),
            SqlitePoolOptions::new().connect(&url).await.unwrap(),
        );
        sqlx::query("CREATE TABLE t (name TEXT NOT NULL)")
            .execute(&writer)
            .await
            .unwrap();
        let mut w = Write::default();
        for name in ["a", "b", "c"] {
            w.push("INSERT INTO t (name) VALUES ($1)", vec![name.into()]);
        }
        // Dropped at its first await: the task it started goes on and commits.
        let mut write = Box::pin(w.run_sqlite(&writer));
        let _ = futures::poll!(write.as_mut());
        drop(write);
        // Seen from another connection: committed, whole.
        let mut count = 0;
        for _ in 0..100 {
            count = sqlx::query_scalar("SELECT COUNT(*) FROM t")
                .fetch_one(&other)
                .await
                .unwrap();
            if count == 3 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(count, 3, "the write was cut or left its transaction open");
    }
}
