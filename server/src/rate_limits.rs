//! Rate limits per client and per session (`governor`'s keyed GCRA limiters): sessions
//! created per hour and messages per minute for each client, messages and commands (settings, context
//! and topic commands) per minute for each session, and streaming replies and uploads at once for each
//! client. A client is a verified user when there is one, else its address ([`Caller`]). Each refusal says when to try again. A limit set
//! to 0 is off. Keys not seen for a while are forgotten by `sweep`, so memory stays bounded by the
//! addresses active in the last hour.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

use crate::identity::VerifiedUser;

/// The configured limits (0 switches one off).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
#[command(next_help_heading = "Rate limits (0: no limit)")]
pub struct RateLimitConfig {
    /// Sessions one address may create per hour.
    #[arg(long, env = "GLASSBOX_LIMIT_SESSIONS_PER_HOUR",
        default_value_t = RateLimitConfig::default().sessions_per_hour)]
    pub sessions_per_hour: u32,
    /// Messages (and retries) one session may send per minute.
    #[arg(long, env = "GLASSBOX_LIMIT_MESSAGES_PER_MINUTE",
        default_value_t = RateLimitConfig::default().messages_per_minute)]
    pub messages_per_minute: u32,
    /// Messages one address may send per minute, over all its sessions.
    #[arg(long, env = "GLASSBOX_LIMIT_ADDRESS_MESSAGES_PER_MINUTE",
        default_value_t = RateLimitConfig::default().address_messages_per_minute)]
    pub address_messages_per_minute: u32,
    /// Replies streaming (or queued) at once for one address.
    #[arg(long, env = "GLASSBOX_LIMIT_STREAMS_PER_ADDRESS",
        default_value_t = RateLimitConfig::default().streams_per_address)]
    pub streams_per_address: u32,
    /// Uploads being read or waiting their turn at once for one address: the server reads 16 at
    /// a time, so one client sending slowly cannot hold them all. The default lets one drop of the
    /// most files a message carries upload at once.
    #[arg(long, env = "GLASSBOX_LIMIT_UPLOADS_PER_ADDRESS",
        default_value_t = RateLimitConfig::default().uploads_per_address)]
    pub uploads_per_address: u32,
    /// Commands one session may send per minute: compression settings, context-set changes, and
    /// the topic commands (filter, similarity, marks, topic reads), each of which reads the
    /// session's history or writes its record.
    #[arg(long, env = "GLASSBOX_LIMIT_COMMANDS_PER_MINUTE",
        default_value_t = RateLimitConfig::default().commands_per_minute)]
    pub commands_per_minute: u32,
    /// Times one session may be joined (a WebSocket hello) per minute: each reads its history, and
    /// with a filter scores it.
    #[arg(long, env = "GLASSBOX_LIMIT_JOINS_PER_MINUTE",
        default_value_t = RateLimitConfig::default().joins_per_minute)]
    pub joins_per_minute: u32,
    /// Previews of a draft one session may ask for per minute: each plans a turn (and may embed
    /// the draft's sentences) without calling the provider.
    #[arg(long, env = "GLASSBOX_LIMIT_PREVIEWS_PER_MINUTE",
        default_value_t = RateLimitConfig::default().previews_per_minute)]
    pub previews_per_minute: u32,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            sessions_per_hour: 30,
            messages_per_minute: 20,
            address_messages_per_minute: 60,
            streams_per_address: 4,
            uploads_per_address: glassbox_core::limits::MAX_ATTACHMENTS as u32,
            commands_per_minute: 120,
            joins_per_minute: 30,
            previews_per_minute: 240,
        }
    }
}

/// Which limit refused, and when the same action may succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{what}; try again in {} s", retry_after.as_secs_f64().ceil())]
pub struct RateLimited {
    /// The refusal in words, for the client.
    pub what: &'static str,
    /// Which limit it is.
    pub limit: Limit,
    /// How long until the same action may succeed.
    pub retry_after: Duration,
}

/// The limits, by name (the metrics' `limit` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Limit {
    /// New sessions per caller and hour.
    CallerSessions,
    /// Messages (and other costly requests) per caller and minute.
    CallerMessages,
    /// Replies streaming at once per caller.
    CallerStreams,
    /// Uploads at once per caller.
    CallerUploads,
    /// Messages per session and minute.
    SessionMessages,
    /// Commands (settings, context, topics) per session and minute.
    SessionCommands,
    /// Joins (a `hello` with the session's token) per session and minute.
    SessionJoins,
    /// Previews of a draft per session and minute.
    SessionPreviews,
}

/// Who a per-client limit counts: a verified user (on any address), else the client's address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Caller {
    /// IPv6 addresses by their /64 (see [`Caller::address`]).
    Address(IpAddr),
    User(VerifiedUser),
}

impl Caller {
    /// The caller of a request from `ip`: IPv6 addresses count by their /64 (one customer's usual
    /// allocation), so a client cannot step around the limits by changing the low bits.
    pub fn address(ip: IpAddr) -> Self {
        Caller::Address(address_key(ip))
    }

    /// The verified user when there is one, else the address (`None`: neither is known, and
    /// nothing is limited per client).
    pub fn of(user: Option<&VerifiedUser>, address: Option<IpAddr>) -> Option<Self> {
        user.cloned()
            .map(Caller::User)
            .or_else(|| address.map(Self::address))
    }

    /// The caller as the shared limits name it.
    fn key(&self) -> String {
        match self {
            Caller::Address(ip) => format!("a:{ip}"),
            Caller::User(user) => format!("u:{}", user.id()),
        }
    }

    /// The refusal's words for this kind of caller.
    fn says(&self, address: &'static str, user: &'static str) -> &'static str {
        match self {
            Caller::Address(_) => address,
            Caller::User(_) => user,
        }
    }
}

/// One keyed limiter on clock `C`.
type Keyed<K, C> =
    RateLimiter<K, DefaultKeyedStateStore<K>, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// The server's rate limiters (on the real clock; tests move a fake one).
pub struct RateLimits<C: Clock = DefaultClock> {
    config: RateLimitConfig,
    clock: C,
    sessions: Option<Keyed<Caller, C>>,
    address_messages: Option<Keyed<Caller, C>>,
    session_messages: Option<Keyed<String, C>>,
    session_commands: Option<Keyed<String, C>>,
    session_joins: Option<Keyed<String, C>>,
    session_previews: Option<Keyed<String, C>>,
    streams: Arc<Mutex<HashMap<Caller, u32>>>,
    uploads: Arc<Mutex<HashMap<Caller, u32>>>,
    /// Where refusals are counted.
    metrics: Option<crate::metrics::Metrics>,
    /// The rate limits several instances share (PostgreSQL): used instead of the in-memory ones,
    /// which stay for when the database does not answer.
    shared: Option<crate::cluster::Rates>,
}

/// Held while something a client may do only so many times at once (a streaming reply, an
/// upload) goes on; dropping it frees the client's place.
#[derive(Debug)]
pub struct AddressPermit {
    held: Arc<Mutex<HashMap<Caller, u32>>>,
    address: Option<Caller>,
}

impl Drop for AddressPermit {
    fn drop(&mut self) {
        let Some(address) = self.address.take() else {
            return;
        };
        if let Ok(mut held) = self.held.lock()
            && let Some(n) = held.get_mut(&address)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&address);
            }
        }
    }
}

/// Takes one of `max` places of `caller` in `held` (`None`, or a `max` of 0: not limited).
fn hold(
    held: &Arc<Mutex<HashMap<Caller, u32>>>,
    caller: Option<&Caller>,
    max: u32,
    refused: RateLimited,
) -> Result<AddressPermit, RateLimited> {
    let permit = |address| AddressPermit {
        held: held.clone(),
        address,
    };
    let (Some(address), Some(max)) = (caller.cloned(), NonZeroU32::new(max)) else {
        return Ok(permit(None));
    };
    let mut counts = held.lock().map_err(|_| refused)?;
    let n = counts.entry(address.clone()).or_insert(0);
    if *n >= max.get() {
        return Err(refused);
    }
    *n += 1;
    drop(counts);
    Ok(permit(Some(address)))
}

/// How long a shared limit may take to answer before this instance counts alone.
const SHARED_WAIT: Duration = Duration::from_millis(250);

/// How long a refused stream should wait before trying again (replies take seconds).
const STREAM_RETRY: Duration = Duration::from_secs(5);
/// How long a refused upload should wait (an upload takes a moment).
const UPLOAD_RETRY: Duration = Duration::from_secs(2);

/// The key an address is limited under: IPv6 addresses by their /64 (one customer's usual
/// allocation), so a client cannot step around the limits by changing the low bits.
fn address_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let mut bytes = v6.octets();
            bytes[8..].fill(0);
            IpAddr::from(bytes)
        }
        v4 => v4,
    }
}

fn limiter<K: std::hash::Hash + Eq + Clone, C: Clock + Clone>(
    n: u32,
    per: fn(NonZeroU32) -> Quota,
    clock: &C,
) -> Option<Keyed<K, C>> {
    NonZeroU32::new(n).map(|n| RateLimiter::dashmap_with_clock(per(n), C::clone(clock)))
}

impl RateLimits {
    pub fn new(config: RateLimitConfig) -> Self {
        Self::with_clock(config, DefaultClock::default())
    }
}

impl<C: Clock + Clone> RateLimits<C> {
    /// Limits on `clock`.
    pub fn with_clock(config: RateLimitConfig, clock: C) -> Self {
        Self {
            sessions: limiter(config.sessions_per_hour, Quota::per_hour, &clock),
            address_messages: limiter(
                config.address_messages_per_minute,
                Quota::per_minute,
                &clock,
            ),
            session_messages: limiter(config.messages_per_minute, Quota::per_minute, &clock),
            session_commands: limiter(config.commands_per_minute, Quota::per_minute, &clock),
            session_joins: limiter(config.joins_per_minute, Quota::per_minute, &clock),
            session_previews: limiter(config.previews_per_minute, Quota::per_minute, &clock),
            config,
            clock,
            streams: Arc::default(),
            uploads: Arc::default(),
            metrics: None,
            shared: None,
        }
    }

    /// The same limits, counted in the database several instances share (the per-minute and
    /// per-hour ones; those at once — streams, uploads — stay per instance).
    pub fn sharing(mut self, rates: crate::cluster::Rates) -> Self {
        self.shared = Some(rates);
        self
    }

    /// How many of `limit` per how long (`None`: a limit on what runs at once, never shared).
    fn quota(&self, limit: Limit) -> Option<(u32, Duration)> {
        const MINUTE: Duration = Duration::from_secs(60);
        let c = &self.config;
        match limit {
            Limit::CallerSessions => Some((c.sessions_per_hour, Duration::from_secs(3_600))),
            Limit::CallerMessages => Some((c.address_messages_per_minute, MINUTE)),
            Limit::SessionMessages => Some((c.messages_per_minute, MINUTE)),
            Limit::SessionCommands => Some((c.commands_per_minute, MINUTE)),
            Limit::SessionJoins => Some((c.joins_per_minute, MINUTE)),
            Limit::SessionPreviews => Some((c.previews_per_minute, MINUTE)),
            Limit::CallerStreams | Limit::CallerUploads => None,
        }
    }

    /// The same limits, counting their refusals in `metrics`.
    pub fn counting(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// `result`, its refusal counted.
    fn counted<T>(&self, result: Result<T, RateLimited>) -> Result<T, RateLimited> {
        if let (Err(e), Some(m)) = (&result, &self.metrics) {
            m.refused(e.limit.into());
        }
        result
    }

    /// The limits in force.
    pub fn config(&self) -> RateLimitConfig {
        self.config
    }

    /// Takes one of `limit` for `key` (`shared_key`: its name in the shared table).
    async fn check<K: std::hash::Hash + Eq + Clone>(
        &self,
        limiter: &Option<Keyed<K, C>>,
        key: &K,
        shared_key: &str,
        limit: Limit,
        what: &'static str,
    ) -> Result<(), RateLimited> {
        let Some(limiter) = limiter else {
            return Ok(());
        };
        if let (Some(shared), Some((n, per))) = (&self.shared, self.quota(limit)) {
            let name: &'static str = limit.into();
            let taken = tokio::time::timeout(
                SHARED_WAIT,
                shared.take(&format!("{name}:{shared_key}"), n, per),
            )
            .await;
            match taken {
                Ok(Ok(taken)) => {
                    return self.counted(taken.map_err(|retry_after| RateLimited {
                        what,
                        limit,
                        retry_after,
                    }));
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, limit = name, "shared rate limit unreadable: counted here");
                }
                Err(_) => {
                    tracing::warn!(
                        limit = name,
                        "shared rate limit slow to answer: counted here"
                    );
                }
            }
        }
        self.counted(limiter.check_key(key).map_err(|not_until| RateLimited {
            what,
            limit,
            retry_after: not_until.wait_time_from(self.clock.now()),
        }))
    }

    /// A new session for `caller` (`None`: unknown and not limited).
    pub async fn create_session(&self, caller: Option<&Caller>) -> Result<(), RateLimited> {
        match caller {
            Some(c) => {
                self.check(
                    &self.sessions,
                    c,
                    &c.key(),
                    Limit::CallerSessions,
                    c.says(
                        "too many new sessions from this address",
                        "too many new sessions for this user",
                    ),
                )
                .await
            }
            None => Ok(()),
        }
    }

    /// A message in `session` from `caller`.
    pub async fn message(&self, caller: Option<&Caller>, session: &str) -> Result<(), RateLimited> {
        if let Some(c) = caller {
            self.check(
                &self.address_messages,
                c,
                &c.key(),
                Limit::CallerMessages,
                c.says(
                    "too many messages from this address",
                    "too many messages from this user",
                ),
            )
            .await?;
        }
        self.check(
            &self.session_messages,
            &session.to_owned(),
            session,
            Limit::SessionMessages,
            "too many messages in this session",
        )
        .await
    }

    /// A command in `session`: a settings or context change, or a topic command.
    pub async fn command(&self, session: &str) -> Result<(), RateLimited> {
        self.check(
            &self.session_commands,
            &session.to_owned(),
            session,
            Limit::SessionCommands,
            "too many commands in this session",
        )
        .await
    }

    /// A tab joining `session` (its token already checked, so nobody else can spend this).
    pub async fn join(&self, session: &str) -> Result<(), RateLimited> {
        self.check(
            &self.session_joins,
            &session.to_owned(),
            session,
            Limit::SessionJoins,
            "this session was joined too often",
        )
        .await
    }

    /// A preview of a draft in `session`.
    pub async fn preview(&self, session: &str) -> Result<(), RateLimited> {
        self.check(
            &self.session_previews,
            &session.to_owned(),
            session,
            Limit::SessionPreviews,
            "too many previews in this session",
        )
        .await
    }

    /// Another request from `caller` that costs the server work (embeddings): it counts against
    /// the caller's messages per minute.
    pub async fn request(&self, caller: Option<&Caller>) -> Result<(), RateLimited> {
        match caller {
            Some(c) => {
                self.check(
                    &self.address_messages,
                    c,
                    &c.key(),
                    Limit::CallerMessages,
                    c.says(
                        "too many requests from this address",
                        "too many requests from this user",
                    ),
                )
                .await
            }
            None => Ok(()),
        }
    }

    /// A streaming reply for `caller`; the permit frees the slot when the reply ends.
    pub fn stream(&self, caller: Option<&Caller>) -> Result<AddressPermit, RateLimited> {
        let what = caller.map_or("", |c| {
            c.says(
                "too many replies streaming for this address",
                "too many replies streaming for this user",
            )
        });
        self.counted(hold(
            &self.streams,
            caller,
            self.config.streams_per_address,
            RateLimited {
                what,
                limit: Limit::CallerStreams,
                retry_after: STREAM_RETRY,
            },
        ))
    }

    /// An upload from `caller`, read or waiting; the permit frees the place when it is stored
    /// or refused.
    pub fn upload(&self, caller: Option<&Caller>) -> Result<AddressPermit, RateLimited> {
        let what = caller.map_or("", |c| {
            c.says(
                "too many uploads at once from this address",
                "too many uploads at once from this user",
            )
        });
        self.counted(hold(
            &self.uploads,
            caller,
            self.config.uploads_per_address,
            RateLimited {
                what,
                limit: Limit::CallerUploads,
                retry_after: UPLOAD_RETRY,
            },
        ))
    }

    /// Forgets keys whose limits are back to full (call now and then).
    pub fn sweep(&self) {
        for l in [&self.sessions, &self.address_messages]
            .into_iter()
            .flatten()
        {
            l.retain_recent();
            l.shrink_to_fit();
        }
        for l in [
            &self.session_messages,
            &self.session_commands,
            &self.session_joins,
            &self.session_previews,
        ]
        .into_iter()
        .flatten()
        {
            l.retain_recent();
            l.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> Option<Caller> {
        Some(Caller::address(IpAddr::from([10, 0, 0, last])))
    }

    #[tokio::test]
    async fn each_limit_refuses_with_a_wait_and_others_are_unaffected() {
        let limits = RateLimits::new(RateLimitConfig {
            sessions_per_hour: 2,
            messages_per_minute: 3,
            address_messages_per_minute: 4,
            streams_per_address: 1,
            uploads_per_address: 2,
            commands_per_minute: 2,
            joins_per_minute: 1,
            previews_per_minute: 2,
        });
        assert!(limits.create_session(ip(1).as_ref()).await.is_ok());
        assert!(limits.create_session(ip(1).as_ref()).await.is_ok());
        let refused = limits.create_session(ip(1).as_ref()).await.unwrap_err();
        assert!(refused.retry_after > Duration::from_secs(60), "{refused:?}");
        assert!(
            limits.create_session(ip(2).as_ref()).await.is_ok(),
            "another address"
        );
        assert!(limits.create_session(None).await.is_ok(), "unknown address");

        for _ in 0..3 {
            assert!(limits.message(ip(1).as_ref(), "s1").await.is_ok());
        }
        let refused = limits.message(ip(1).as_ref(), "s1").await.unwrap_err();
        assert_eq!(refused.what, "too many messages in this session");
        assert!(
            refused.retry_after > Duration::ZERO && refused.retry_after <= Duration::from_secs(20)
        );
        // The address's own budget: 4 a minute over all its sessions (one was spent by the
        // refused call above, which the address limiter had already let through).
        let refused = limits.message(ip(1).as_ref(), "s2").await.unwrap_err();
        assert_eq!(refused.what, "too many messages from this address");

        let first = limits.stream(ip(1).as_ref()).unwrap();
        assert!(limits.stream(ip(1).as_ref()).is_err());
        assert!(limits.stream(ip(2).as_ref()).is_ok());
        drop(first);
        assert!(
            limits.stream(ip(1).as_ref()).is_ok(),
            "the slot is free again"
        );

        let uploads = [
            limits.upload(ip(1).as_ref()).unwrap(),
            limits.upload(ip(1).as_ref()).unwrap(),
        ];
        let refused = limits.upload(ip(1).as_ref()).unwrap_err();
        assert_eq!(refused.what, "too many uploads at once from this address");
        assert!(limits.upload(ip(2).as_ref()).is_ok(), "another address");
        let _streaming = limits.stream(ip(1).as_ref()).unwrap();
        drop(uploads);
        assert!(
            limits.upload(ip(1).as_ref()).is_ok(),
            "the places are free again"
        );

        assert!(limits.command("s1").await.is_ok());
        assert!(limits.command("s1").await.is_ok());
        let refused = limits.command("s1").await.unwrap_err();
        assert_eq!(refused.what, "too many commands in this session");
        assert!(limits.command("s2").await.is_ok(), "another session");

        assert!(limits.preview("s1").await.is_ok());
        assert!(limits.preview("s1").await.is_ok());
        let refused = limits.preview("s1").await.unwrap_err();
        assert_eq!(refused.what, "too many previews in this session");
        assert!(limits.preview("s2").await.is_ok(), "another session");
        assert!(
            limits.message(ip(3).as_ref(), "s3").await.is_ok(),
            "messages are counted apart"
        );

        assert!(limits.join("s1").await.is_ok());
        let refused = limits.join("s1").await.unwrap_err();
        assert_eq!(refused.what, "this session was joined too often");
        assert!(limits.join("s2").await.is_ok(), "another session");
        assert!(
            limits.command("s3").await.is_ok(),
            "joins are counted apart from commands"
        );
    }

    /// A drop of the most files a message carries uploads at once under the default limit.
    #[tokio::test]
    async fn the_default_lets_one_message_upload_all_its_files_at_once() {
        let limits = RateLimits::new(RateLimitConfig::default());
        let held: Vec<_> = (0..glassbox_core::limits::MAX_ATTACHMENTS)
            .map(|_| limits.upload(ip(1).as_ref()).unwrap())
            .collect();
        assert!(
            limits.upload(ip(1).as_ref()).is_err(),
            "one more is refused until one ends"
        );
        drop(held);
    }

    #[tokio::test]
    async fn limits_lift_as_time_passes() {
        let clock = governor::clock::FakeRelativeClock::default();
        let limits = RateLimits::with_clock(
            RateLimitConfig {
                sessions_per_hour: 1,
                messages_per_minute: 2,
                ..RateLimitConfig::default()
            },
            clock.clone(),
        );
        assert!(limits.message(ip(1).as_ref(), "s").await.is_ok());
        assert!(limits.message(ip(1).as_ref(), "s").await.is_ok());
        let wait = limits
            .message(ip(1).as_ref(), "s")
            .await
            .unwrap_err()
            .retry_after;
        assert_eq!(
            wait,
            Duration::from_secs(30),
            "2 a minute: one more every 30 s"
        );
        clock.advance(wait);
        assert!(
            limits.message(ip(1).as_ref(), "s").await.is_ok(),
            "lifted once the wait is over"
        );

        assert!(limits.create_session(ip(1).as_ref()).await.is_ok());
        let wait = limits
            .create_session(ip(1).as_ref())
            .await
            .unwrap_err()
            .retry_after;
        assert_eq!(wait, Duration::from_secs(3_600));
        clock.advance(wait);
        assert!(limits.create_session(ip(1).as_ref()).await.is_ok());
    }

    #[tokio::test]
    async fn ipv6_clients_are_limited_by_their_64() {
        let limits = RateLimits::new(RateLimitConfig {
            sessions_per_hour: 1,
            ..RateLimitConfig::default()
        });
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        let c = |ip| Some(Caller::address(ip));
        assert!(limits.create_session(c(a).as_ref()).await.is_ok());
        assert!(
            limits.create_session(c(b).as_ref()).await.is_err(),
            "same /64"
        );
        assert!(limits.create_session(c(other).as_ref()).await.is_ok());
    }

    #[tokio::test]
    async fn a_verified_user_is_counted_apart_from_their_address_and_on_every_address() {
        let limits = RateLimits::new(RateLimitConfig {
            sessions_per_hour: 1,
            streams_per_address: 1,
            ..RateLimitConfig::default()
        });
        let identity = crate::identity::Identity::new(Some(b"a-secret-of-sixteen+"));
        let user = |id: &str| {
            identity
                .verify(&glassbox_core::wire::UserClaim {
                    id: id.into(),
                    hash: crate::identity::user_hash("a-secret-of-sixteen+", id),
                })
                .unwrap()
        };
        let (ann, bob) = (user("ann"), user("bob"));
        let on = |u: &VerifiedUser, last| Caller::of(Some(u), Some(IpAddr::from([10, 0, 0, last])));
        assert!(limits.create_session(on(&ann, 1).as_ref()).await.is_ok());
        let refused = limits
            .create_session(on(&ann, 2).as_ref())
            .await
            .unwrap_err();
        assert_eq!(
            refused.what, "too many new sessions for this user",
            "another address, same user"
        );
        assert!(
            limits.create_session(on(&bob, 1).as_ref()).await.is_ok(),
            "another user, same address"
        );
        assert!(
            limits.create_session(ip(1).as_ref()).await.is_ok(),
            "the address itself, anonymous"
        );
        let _streaming = limits.stream(on(&ann, 1).as_ref()).unwrap();
        assert!(limits.stream(on(&ann, 3).as_ref()).is_err());
        assert!(limits.stream(ip(3).as_ref()).is_ok());
    }

    #[tokio::test]
    async fn zero_switches_a_limit_off() {
        let limits = RateLimits::new(RateLimitConfig {
            sessions_per_hour: 0,
            messages_per_minute: 0,
            address_messages_per_minute: 0,
            streams_per_address: 0,
            uploads_per_address: 0,
            commands_per_minute: 0,
            joins_per_minute: 0,
            previews_per_minute: 0,
        });
        for _ in 0..1_000 {
            assert!(limits.create_session(ip(1).as_ref()).await.is_ok());
            assert!(limits.message(ip(1).as_ref(), "s").await.is_ok());
            assert!(limits.command("s").await.is_ok());
            assert!(limits.join("s").await.is_ok());
            assert!(limits.preview("s").await.is_ok());
            std::mem::forget(limits.stream(ip(1).as_ref()).unwrap());
            std::mem::forget(limits.upload(ip(1).as_ref()).unwrap());
        }
    }
}
