//! What several instances sharing a PostgreSQL database coordinate through it: the frame log
//! (numbered frames with `NOTIFY`), turn leases, the instances' heartbeats, and commands meant for
//! the instance that runs a reply (docs/instances.md). On SQLite (one process) none of this runs.

pub mod frames;
pub mod instances;
pub mod leases;
pub mod rates;

use std::sync::Arc;

use sqlx::PgPool;

pub use frames::{FrameLog, FrameLogError, Logged, Since};
pub use instances::Instances;
pub use leases::{Leases, TurnLease};
pub use rates::Rates;

/// Now, in milliseconds since the Unix epoch, by the database's clock: the one clock every
/// instance shares (heartbeats and leases compare times written by different machines).
pub(crate) const DB_NOW: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// The channel of commands between instances, payload `stop:{session}:{reply}` or
/// `deleted:{session}`.
pub const COMMANDS_CHANNEL: &str = "glassbox_commands";

/// A command one instance sends every instance (the one running the reply acts on it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Stop reply `reply_id` of session `session_id`.
    Stop {
        session_id: String,
        reply_id: String,
    },
    /// Session `session_id` was deleted: every instance tells its tabs and forgets it.
    Deleted { session_id: String },
}

impl Command {
    fn payload(&self) -> String {
        match self {
            Command::Stop {
                session_id,
                reply_id,
            } => format!("stop:{session_id}:{reply_id}"),
            Command::Deleted { session_id } => format!("deleted:{session_id}"),
        }
    }

    /// Reads a command's payload (ids have no `:`); `None` for anything else.
    pub fn parse(payload: &str) -> Option<Self> {
        if let Some(session) = payload.strip_prefix("deleted:") {
            return (!session.is_empty() && !session.contains(':')).then(|| Command::Deleted {
                session_id: session.to_owned(),
            });
        }
        let mut parts = payload.splitn(3, ':');
        match (parts.next()?, parts.next()?, parts.next()?) {
            ("stop", session, reply) if !session.is_empty() && !reply.is_empty() => {
                Some(Command::Stop {
                    session_id: session.to_owned(),
                    reply_id: reply.to_owned(),
                })
            }
            _ => None,
        }
    }
}

/// This instance's part in a cluster of instances on one PostgreSQL database.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// This instance's id (random per process).
    pub id: Arc<str>,
    pub pool: PgPool,
    pub frames: FrameLog,
    pub leases: Leases,
    pub instances: Instances,
    pub rates: Rates,
}

impl Cluster {
    /// Joins the cluster on `pool` as a new instance.
    pub fn new(pool: PgPool) -> Self {
        let id: Arc<str> = Arc::from(uuid::Uuid::new_v4().simple().to_string());
        Self {
            frames: FrameLog::new(pool.clone()),
            leases: Leases::new(pool.clone(), id.clone()),
            instances: Instances::new(pool.clone(), id.clone()),
            rates: Rates::new(pool.clone()),
            id,
            pool,
        }
    }

    /// Sends `command` to every instance.
    pub async fn send(&self, command: &Command) -> Result<(), sqlx::Error> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(COMMANDS_CHANNEL)
            .bind(command.payload())
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_read_back_and_nothing_else_reads() {
        let stop = Command::Stop {
            session_id: "s1".into(),
            reply_id: "r1".into(),
        };
        assert_eq!(Command::parse(&stop.payload()), Some(stop));
        let deleted = Command::Deleted {
            session_id: "s1".into(),
        };
        assert_eq!(Command::parse(&deleted.payload()), Some(deleted));
        assert_eq!(Command::parse("deleted:"), None);
        assert_eq!(Command::parse("stop:s1"), None);
        assert_eq!(Command::parse("stop::r"), None);
        assert_eq!(Command::parse("start:s:r"), None);
    }
}
