//! What the host page configures: server, session slot, model, theme.

/// Colour theme of the widget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
        match s.map(str::trim) {
            Some("light") => Theme::Light,
            Some("dark") => Theme::Dark,
            _ => Theme::Auto,
        }
    }

    /// The `data-theme` value the stylesheet keys on.
    pub fn as_str(self) -> &'static str {
        match self {
            Theme::Light => "light",
            Theme::Dark => "dark",
            Theme::Auto => "auto",
        }
    }
}

/// Configuration of one widget instance.
#[derive(Debug, Clone, PartialEq)]
pub struct WidgetConfig {
    /// Base URL of the Glassbox server, e.g. `https://chat.example.com`.
    pub server: String,
    /// Names the conversation slot in local storage, so several widgets on a page keep separate sessions.
    pub session: String,
    /// Model to ask the server for; the server's default when `None`.
    pub model: Option<String>,
    pub theme: Theme,
}

impl WidgetConfig {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ws_url_follows_the_scheme() {
        let c = |s: &str| WidgetConfig {
            server: s.into(),
            session: "default".into(),
            model: None,
            theme: Theme::Auto,
        };
        assert_eq!(c("https://x.org/").ws_url(), "wss://x.org/ws");
        assert_eq!(
            c("http://127.0.0.1:8080").ws_url(),
            "ws://127.0.0.1:8080/ws"
        );
    }
}
