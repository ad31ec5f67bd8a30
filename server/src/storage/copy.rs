//! Copying a whole database into another (`glassbox-server migrate --from … --to …`): every
//! table, in an order that keeps references whole, a page at a time by primary key. A row the
//! destination has already is left as it is, so a copy cut short can be run again.

use super::{StorageError, Store, on_db, params};

/// How many rows one statement reads or writes.
const PAGE: i64 = 500;
/// Files' rows hold their bytes (an image up to 3.75 MB): fewer at a time.
const FILES_PAGE: i64 = 16;

/// What a column holds, as both databases store it.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Int,
    Text,
    Bytes,
}

use Kind::{Bytes, Int, Text};

/// A table: its name, its columns with their kinds (the primary key's first, in its order) and
/// how many of them form the key.
struct Table {
    name: &'static str,
    columns: &'static [(&'static str, Kind)],
    key: usize,
}

impl Table {
    /// Rows per page.
    fn page(&self) -> i64 {
        if self.name == "files" {
            FILES_PAGE
        } else {
            PAGE
        }
    }
}

/// Every table, parents before children.
const TABLES: &[Table] = &[
    Table {
        name: "sessions",
        columns: &[
            ("id", Text),
            ("token_hash", Text),
            ("created_at", Int),
            ("compression_json", Text),
            ("settings_json", Text),
            ("last_active_at", Int),
            ("tokens_used", Int),
            ("user_id", Text),
            ("title", Text),
        ],
        key: 1,
    },
    Table {
        name: "messages",
        columns: &[
            ("id", Text),
            ("session_id", Text),
            ("seq", Int),
            ("role", Text),
            ("content", Text),
            ("status", Text),
            ("client_message_id", Text),
            ("reply_to", Text),
            ("context_json", Text),
            ("attachments_json", Text),
            ("usage_json", Text),
            ("error_json", Text),
            ("created_at", Int),
            ("context_report_json", Text),
            ("tool_rounds_json", Text),
            ("mark", Text),
            ("approvals_json", Text),
        ],
        key: 1,
    },
    Table {
        name: "embedding_cache",
        columns: &[("model", Text), ("cache_key", Text), ("vector", Bytes)],
        key: 2,
    },
    Table {
        name: "summaries",
        columns: &[
            ("session_id", Text),
            ("first_message_id", Text),
            ("last_message_id", Text),
            ("content_hash", Text),
            ("summary", Text),
            ("created_at", Int),
        ],
        key: 4,
    },
    Table {
        name: "usage_days",
        columns: &[("day", Int), ("tokens", Int)],
        key: 1,
    },
    Table {
        name: "user_usage_days",
        columns: &[("user_id", Text), ("day", Int), ("tokens", Int)],
        key: 2,
    },
    Table {
        name: "session_topics",
        columns: &[
            ("session_id", Text),
            ("generation", Int),
            ("topics_json", Text),
            ("updated_at", Int),
        ],
        key: 1,
    },
    Table {
        name: "files",
        columns: &[
            ("id", Text),
            ("session_id", Text),
            ("name", Text),
            ("mime_type", Text),
            ("kind", Text),
            ("size", Int),
            ("width", Int),
            ("height", Int),
            ("bytes", Bytes),
            ("created_at", Int),
        ],
        key: 1,
    },
];

impl Table {
    /// The names of `columns`, comma-separated.
    fn names(&self, columns: &[(&str, Kind)]) -> String {
        columns
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One value of a copied row.
#[derive(Debug, Clone)]
enum Value {
    Int(Option<i64>),
    Text(Option<String>),
    Bytes(Option<Vec<u8>>),
}

/// What a copy did: per table, the rows read and how many of them were new to the destination.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Copied {
    pub tables: Vec<(&'static str, u64, u64)>,
}

/// `$query` with `$value` (a [`Value`], moved) bound.
macro_rules! bind_value {
    ($query:expr, $value:expr) => {
        match $value {
            Value::Int(v) => $query.bind(v),
            Value::Text(v) => $query.bind(v),
            Value::Bytes(v) => $query.bind(v),
        }
    };
}

impl Store {
    /// Copies every row of `from` into this store (whose migrations made the same tables); rows
    /// already here are kept. `progress` hears each table's name and rows read so far.
    pub async fn copy_from(
        &self,
        from: &Store,
        mut progress: impl FnMut(&str, u64),
    ) -> Result<Copied, StorageError> {
        let mut copied = Copied::default();
        for table in TABLES {
            let (mut read, mut written) = (0u64, 0u64);
            let mut after: Option<Vec<Value>> = None;
            loop {
                let rows = self.page(from, table, after.as_deref()).await?;
                let Some(last) = rows.last() else { break };
                after = Some(last[..table.key].to_vec());
                let n = rows.len();
                read += n as u64;
                written += self.insert_rows(table, rows).await?;
                progress(table.name, read);
                if (n as i64) < table.page() {
                    break;
                }
            }
            copied.tables.push((table.name, read, written));
        }
        Ok(copied)
    }

    /// The page of `from`'s `table` after key `after` (`None`: the first), by key.
    async fn page(
        &self,
        from: &Store,
        table: &Table,
        after: Option<&[Value]>,
    ) -> Result<Vec<Vec<Value>>, StorageError> {
        let key = table.names(&table.columns[..table.key]);
        let filter = match after {
            None => String::new(),
            Some(_) => format!("WHERE ({key}) > ({})", params(1, table.key)),
        };
        let sql = format!(
            "SELECT {} FROM {} {filter} ORDER BY {key} LIMIT {}",
            table.names(table.columns),
            table.name,
            table.page(),
        );
        on_db!(from, read, |db, d| {
            let mut query = sqlx::query(&sql);
            for value in after.into_iter().flatten() {
                query = bind_value!(query, value.clone());
            }
            let mut out = Vec::new();
            for row in query.fetch_all(db).await? {
                use sqlx::Row;
                let mut values = Vec::with_capacity(table.columns.len());
                for (i, (_, kind)) in table.columns.iter().enumerate() {
                    values.push(match kind {
                        Int => Value::Int(row.try_get(i)?),
                        // NUL is text PostgreSQL refuses (and the server no longer writes): left out.
                        Text => Value::Text(row.try_get::<Option<String>, _>(i)?.map(|t| {
                            if t.contains('\0') {
                                t.replace('\0', "")
                            } else {
                                t
                            }
                        })),
                        Bytes => Value::Bytes(row.try_get(i)?),
                    });
                }
                out.push(values);
            }
            Ok(out)
        })
    }

    /// Inserts `rows` of `table`, leaving those whose key is here; returns how many were new.
    async fn insert_rows(&self, table: &Table, rows: Vec<Vec<Value>>) -> Result<u64, StorageError> {
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING",
            table.name,
            table.names(table.columns),
            params(1, table.columns.len())
        );
        on_db!(self, write, |db, d| {
            let mut tx = db.begin().await?;
            let mut written = 0;
            for row in rows {
                let mut query = sqlx::query(&sql);
                for value in row {
                    query = bind_value!(query, value);
                }
                written += query.execute(&mut *tx).await?.rows_affected();
            }
            tx.commit().await?;
            Ok(written)
        })
    }
}
