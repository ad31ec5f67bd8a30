//! Which web pages may use this server (`GLASSBOX_ALLOWED_ORIGINS`): a comma list of origins such as
//! `https://shop.example.com`, `https://*.example.com` (any subdomain) or `http://localhost:*` (any
//! port); `*` alone allows every origin and is only ever set explicitly. Unset, the server's own
//! origin (an `Origin` naming the host the request was sent to) and `http://localhost:*`,
//! `http://127.0.0.1:*`, `http://[::1]:*` are allowed, for development. `null` (sandboxed frames,
//! files) is never allowed.

use std::fmt;

/// The origins allowed to drive the server from a browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedOrigins {
    /// Every origin (`*`).
    Any,
    /// These, plus the server's own origin.
    List(Vec<OriginPattern>),
}

/// One allowed origin, possibly with a wildcard port or subdomain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginPattern {
    scheme: String,
    /// Lowercase host; with `wildcard_subdomain`, the parent domain (`example.com`).
    host: String,
    wildcard_subdomain: bool,
    /// `None` means any port.
    port: Option<u16>,
}

/// A `GLASSBOX_ALLOWED_ORIGINS` entry that is not an origin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "GLASSBOX_ALLOWED_ORIGINS: {entry:?} is not an origin ({why}); use e.g. \
     https://shop.example.com, https://*.example.com, http://localhost:*, or * alone"
)]
pub struct OriginConfigError {
    pub entry: String,
    pub why: &'static str,
}

impl Default for AllowedOrigins {
    fn default() -> Self {
        AllowedOrigins::List(
            ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
                .into_iter()
                .filter_map(|p| OriginPattern::parse(p).ok())
                .collect(),
        )
    }
}

impl AllowedOrigins {
    /// Reads the variable's value (`None` or blank: the development default).
    pub fn parse(value: Option<&str>) -> Result<Self, OriginConfigError> {
        let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(Self::default());
        };
        let entries: Vec<&str> = value
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        if entries.contains(&"*") {
            if entries.len() > 1 {
                return Err(OriginConfigError {
                    entry: value.to_owned(),
                    why: "* allows every origin and cannot be combined with others",
                });
            }
            return Ok(AllowedOrigins::Any);
        }
        entries
            .into_iter()
            .map(OriginPattern::parse)
            .collect::<Result<_, _>>()
            .map(AllowedOrigins::List)
    }

    /// Whether a request with this `Origin` header, sent to `host` (its `Host` header), is allowed.
    pub fn allows(&self, origin: &str, host: Option<&str>) -> bool {
        let Some(origin) = Origin::parse(origin) else {
            return false; // `null`, or not an origin at all
        };
        match self {
            AllowedOrigins::Any => true,
            AllowedOrigins::List(patterns) => {
                host.is_some_and(|h| origin.authority().eq_ignore_ascii_case(h.trim()))
                    || patterns.iter().any(|p| p.matches(&origin))
            }
        }
    }
}

impl fmt::Display for AllowedOrigins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllowedOrigins::Any => f.write_str("*"),
            AllowedOrigins::List(list) => {
                f.write_str("this server's own origin")?;
                for p in list {
                    write!(f, ", {p}")?;
                }
                Ok(())
            }
        }
    }
}

impl OriginPattern {
    fn parse(entry: &str) -> Result<Self, OriginConfigError> {
        let err = |why| OriginConfigError {
            entry: entry.to_owned(),
            why,
        };
        let (scheme, rest) = entry.split_once("://").ok_or_else(|| err("no scheme"))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(err("the scheme must be http or https"));
        }
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#', '@']) || rest.is_empty() {
            return Err(err("an origin has no path, query or user"));
        }
        let (host, port) = split_port(rest).ok_or_else(|| err("the port is not a number or *"))?;
        let (host, wildcard_subdomain) = match host.strip_prefix("*.") {
            Some(parent) => (parent, true),
            None => (host, false),
        };
        if host.is_empty() || host.contains('*') {
            return Err(err("a wildcard may only be a leading \"*.\" or the port"));
        }
        Ok(OriginPattern {
            port: match port {
                PortSpec::Any => None,
                PortSpec::Default => Some(default_port(&scheme)),
                PortSpec::Exact(p) => Some(p),
            },
            scheme,
            host: host.to_ascii_lowercase(),
            wildcard_subdomain,
        })
    }

    fn matches(&self, origin: &Origin) -> bool {
        let host_ok = if self.wildcard_subdomain {
            origin
                .host
                .strip_suffix(&self.host)
                .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.'))
        } else {
            origin.host == self.host
        };
        origin.scheme == self.scheme && host_ok && self.port.is_none_or(|p| p == origin.port)
    }
}

impl fmt::Display for OriginPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let wild = if self.wildcard_subdomain { "*." } else { "" };
        write!(f, "{}://{wild}{}", self.scheme, self.host)?;
        match self.port {
            None => f.write_str(":*"),
            Some(p) if p == default_port(&self.scheme) => Ok(()),
            Some(p) => write!(f, ":{p}"),
        }
    }
}

/// A parsed `Origin` header.
struct Origin {
    scheme: String,
    host: String,
    port: u16,
    /// `host[:port]` as written, for the same-origin comparison with `Host`.
    authority: String,
}

impl Origin {
    fn parse(value: &str) -> Option<Self> {
        let (scheme, rest) = value.trim().split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return None;
        }
        if rest.is_empty() || rest.contains(['/', '?', '#', '@', '*']) {
            return None;
        }
        let (host, port) = split_port(rest)?;
        let port = match port {
            PortSpec::Default => default_port(&scheme),
            PortSpec::Exact(p) => p,
            PortSpec::Any => return None,
        };
        Some(Origin {
            host: host.to_ascii_lowercase(),
            authority: rest.to_owned(),
            scheme,
            port,
        })
    }

    fn authority(&self) -> &str {
        &self.authority
    }
}

enum PortSpec {
    Default,
    Any,
    Exact(u16),
}

/// `host[:port]` → host and port; IPv6 hosts are bracketed (`[::1]:8080`).
fn split_port(authority: &str) -> Option<(&str, PortSpec)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let end = rest.find(']')?;
        let host = &authority[..end + 2];
        match &rest[end + 1..] {
            "" => (host, None),
            p => (host, Some(p.strip_prefix(':')?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => PortSpec::Default,
        Some("*") => PortSpec::Any,
        Some(p) => PortSpec::Exact(p.parse().ok()?),
    };
    Some((host, port))
}

fn default_port(scheme: &str) -> u16 {
    if scheme == "https" { 443 } else { 80 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_allows_the_servers_own_origin_and_local_development_only() {
        let o = AllowedOrigins::parse(None).unwrap();
        assert!(o.allows("http://127.0.0.1:8080", Some("127.0.0.1:8080")));
        assert!(o.allows("http://localhost:3000", Some("chat.example.com")));
        assert!(o.allows("http://[::1]:5173", None));
        assert!(
            o.allows("https://chat.example.com", Some("chat.example.com")),
            "same origin"
        );
        for bad in [
            "https://evil.example",
            "null",
            "",
            "file://",
            "http://localhost.evil.example:80",
            "https://localhost:3000",
        ] {
            assert!(!o.allows(bad, Some("chat.example.com")), "{bad}");
        }
    }

    #[test]
    fn listed_origins_ports_and_subdomains() {
        let o = AllowedOrigins::parse(Some(
            "https://shop.example.com, https://*.example.org/, http://localhost:*",
        ))
        .unwrap();
        assert!(o.allows("https://shop.example.com", None));
        assert!(o.allows("https://shop.example.com:443", None));
        assert!(!o.allows("https://shop.example.com:8443", None));
        assert!(!o.allows("http://shop.example.com", None), "scheme matters");
        assert!(o.allows("https://a.b.example.org", None));
        assert!(
            !o.allows("https://example.org", None),
            "*. needs a subdomain"
        );
        assert!(!o.allows("https://evilexample.org", None));
        assert!(o.allows("http://localhost:9", None));
        assert!(!o.allows("https://shop.example.com.evil.example", None));
        assert_eq!(
            o.to_string(),
            "this server's own origin, https://shop.example.com, https://*.example.org, http://localhost:*"
        );
    }

    #[test]
    fn star_is_explicit_and_alone_and_bad_entries_are_named() {
        assert_eq!(
            AllowedOrigins::parse(Some("*")).unwrap(),
            AllowedOrigins::Any
        );
        assert!(AllowedOrigins::Any.allows("https://anything.example", None));
        assert!(!AllowedOrigins::Any.allows("null", None));
        for bad in [
            "*, https://a.example",
            "example.com",
            "ftp://x.example",
            "https://x.example/path",
            "https://x.example:port",
            "https://a.*.example",
        ] {
            let e = AllowedOrigins::parse(Some(bad)).unwrap_err();
            assert!(
                e.to_string().contains("GLASSBOX_ALLOWED_ORIGINS"),
                "{bad}: {e}"
            );
        }
    }
}
