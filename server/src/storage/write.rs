//! A write of several statements in one transaction, described as data ([`Write`]) and run by
//! each backend its own way: on SQLite in one round trip to the writer connection's thread, on
//! PostgreSQL statement by statement in a transaction.
//!
//! sqlx runs each statement on SQLite, and each `BEGIN` and `COMMIT`, as a round trip to the
//! thread that owns the connection: two thread wake-ups, ~30 µs each on a 2-core machine. A turn's
//! first write (the session's use, the user message and the reply's placeholder) and its last (the
//! reply and its spend) took four and five of them, a third of the time the server added to a
//! reply (`cargo xtask bench gateway`). Here their statements go as one query string between
//! `BEGIN IMMEDIATE` and `COMMIT`, each statement's `$1`… renumbered to follow the one before.
//! Statements of a [`Write`] have no `$` in their string literals.

use std::borrow::Cow;

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

/// Statements that commit together or not at all; the rows they return, in order, are the
/// write's answer.
#[derive(Debug, Clone, Default)]
pub(super) struct Write {
    statements: Vec<Statement>,
}

impl Write {
    /// Appends `sql` with the values of its parameters.
    pub fn push(&mut self, sql: impl Into<Cow<'static, str>>, values: Vec<Value>) {
        self.statements.push(Statement {
            sql: sql.into(),
            values,
        });
    }

    /// Runs the write on SQLite's writer: one query string, one round trip. It runs in a task of
    /// its own, so a caller that goes away (a client hanging up) cannot cut it between two
    /// statements; a statement that fails rolls back those before it.
    pub async fn run_sqlite(self, writer: &SqlitePool) -> Result<Vec<SqliteRow>, sqlx::Error> {
        let (sql, args) = self.sqlite_batch()?;
        let writer = writer.clone();
        let ran = tokio::spawn(async move {
            let mut conn = writer.acquire().await?;
            let rows = sqlx::query_with(&sql, args).fetch_all(&mut *conn).await;
            if rows.is_err() && conn.execute("ROLLBACK").await.is_err() {
                // In no state to be trusted with the next write.
                conn.close_on_drop();
            }
            rows
        })
        .await;
        ran.map_err(|e| sqlx::Error::Protocol(format!("a write's task ended: {e}")))?
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

    /// Runs the write on PostgreSQL: its statements in a transaction (a single one alone).
    pub async fn run_postgres(self, pool: &PgPool) -> Result<Vec<PgRow>, sqlx::Error> {
        let mut rows = Vec::new();
        if let [statement] = &self.statements[..] {
            rows.extend(postgres_query(statement).fetch_all(pool).await?);
            return Ok(rows);
        }
        let mut tx = pool.begin().await?;
        for statement in &self.statements {
            rows.extend(postgres_query(statement).fetch_all(&mut *tx).await?);
        }
        tx.commit().await?;
        Ok(rows)
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

/// `sql` with each parameter `$n` written `$(n + by)`.
fn renumber(sql: &str, by: usize) -> String {
    if by == 0 {
        return sql.to_owned();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        match rest[..digits].parse::<usize>() {
            Ok(n) => out.push_str(&(n + by).to_string()),
            Err(_) => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use sqlx::Row as _;
    use sqlx::sqlite::SqlitePoolOptions;

    use super::*;

    #[test]
    fn parameters_are_renumbered_to_follow_the_statements_before() {
        assert_eq!(renumber("a = $1 AND b = $12, $1", 3), "a = $4 AND b = $15, $4");
        assert_eq!(renumber("a = $1", 0), "a = $1");
        assert_eq!(renumber("no parameters", 5), "no parameters");
        assert_eq!(renumber("a lone $ sign", 5), "a lone $ sign");
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
        let rows = w.run_sqlite(&pool).await.unwrap();
        let got: Vec<(String, i64)> = rows
            .iter()
            .map(|r| (r.get("name"), r.get("n")))
            .collect();
        assert_eq!(got, [("b".to_owned(), 2), ("a".to_owned(), 11)]);
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
        let write = w.run_sqlite(&writer);
        tokio::pin!(write);
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
