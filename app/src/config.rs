//! What the host page configures: server, session slot, model, theme, the context footer's links,
//! the idle URL capture and whether page-context values may be shown.

use glassbox_core::context::capture::CaptureRule;
use glassbox_core::context::footer::FooterLinks;
use glassbox_core::wire::{Greeting, UserClaim};

/// Colour theme of the widget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "lowercase")]
pub enum Theme {
    Light,
    Dark,
    /// Follows the user's system preference.
    #[default]
    Auto,
}

impl Theme {
    /// Parses the `theme` attribute; unknown values mean `Auto`.
    pub fn parse(s: Option<&str>) -> Self {
        s.and_then(|s| s.trim().parse().ok()).unwrap_or_default()
    }

    /// The `data-theme` value the stylesheet keys on (the attribute's own word).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Configuration of one widget instance.
#[derive(Debug, Clone, PartialEq)]
pub struct WidgetConfig {
    /// Base URL of the Glassbox server, e.g. `https://chat.example.com`.
    pub server: String,
    /// Names the conversation slot in local storage, so several widgets on a page keep separate sessions.
    pub session: String,
    /// The agent a new session is for; the server's first agent when `None`.
    pub agent: Option<String>,
    /// Model to ask the server for; the server's default when `None`.
    pub model: Option<String>,
    pub theme: Theme,
    /// URL of the folder the widget's files are served from (token worker, vocabularies).
    pub assets: String,
    /// Vocabulary URL with `{encoding}` for the encoding's name; `{assets}vocab/{encoding}.gbv` if unset.
    pub vocab_url: Option<String>,
    /// URL templates of the context footer's links.
    pub footer_links: FooterLinks,
    /// Which query parameter of the page's URL is captured into a context set when idle (none: off).
    pub capture: Option<CaptureRule>,
    /// Whether "View context" may show the page context's values (key names are always shown).
    pub show_context_values: bool,
    /// The user the host's backend vouches for (`user-id` and `user-hash`): their sessions are
    /// theirs on any device.
    pub user: Option<UserClaim>,
    /// The host's placeholder, welcome and starters (`placeholder`, `welcome`, `starters`), cut to
    /// their limits; each wins over the agent's.
    pub greeting: Greeting,
}

impl WidgetConfig {
    /// The local-storage slot of the conversation: the `session` name, per agent when one is
    /// asked for (each agent keeps its own conversation), per verified user when there is one
    /// (another user of the same browser starts their own).
    pub fn slot(&self) -> String {
        let mut slot = self.session.clone();
        if let Some(agent) = &self.agent {
            slot = format!("{slot}@{agent}");
        }
        if let Some(user) = &self.user {
            slot = format!("{slot}~{}", user.id);
        }
        slot
    }

    /// The token worker's script URL.
    pub fn worker_url(&self) -> String {
        asset_url(&self.assets, "token-worker.js")
    }

    /// The vocabulary URL template.
    pub fn vocab_url(&self) -> String {
        self.vocab_url
            .clone()
            .unwrap_or_else(|| asset_url(&self.assets, "vocab/{encoding}.gbv"))
    }

    /// The WebSocket URL of the server.
    pub fn ws_url(&self) -> String {
        let base = self.server.trim_end_matches('/');
        let base = if let Some(rest) = base.strip_prefix("https://") {
            format!("wss://{rest}")
        } else if let Some(rest) = base.strip_prefix("http://") {
            format!("ws://{rest}")
        } else {
            base.to_owned()
        };
        format!("{base}/ws")
    }
}

/// `file` inside the folder `base` (with or without a trailing slash).
pub fn asset_url(base: &str, file: &str) -> String {
    format!("{}/{file}", base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ws_url_follows_the_scheme() {
        let c = |s: &str| WidgetConfig {
            server: s.into(),
            session: "default".into(),
            agent: None,
            model: None,
            theme: Theme::Auto,
            assets: "x".into(),
            vocab_url: None,
            footer_links: FooterLinks::default(),
            capture: None,
            show_context_values: true,
            user: None,
            greeting: Greeting::default(),
        };
        assert_eq!(c("https://x.org/").ws_url(), "wss://x.org/ws");
        assert_eq!(
            c("http://127.0.0.1:8080").ws_url(),
            "ws://127.0.0.1:8080/ws"
        );
    }
}
