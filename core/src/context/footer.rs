//! What the context footer shows for a session's context sets (docs/context-sets.md): 📎, the
//! basenames of up to 5 files, the applet as `[slug]`, endpoints and ports compactly. Links come from
//! URL templates per set; only http(s) and same-site relative links are ever produced. Pure, so the
//! footer's rules are tested natively; the widget renders labels as text (never as HTML).

use super::sets::ContextSets;
use crate::vocab::PageContext;

/// Files shown before the rest is summarized as "+N".
pub const MAX_FILES_SHOWN: usize = 5;
/// Longest label, in characters (longer ones end in "…").
pub const MAX_LABEL_CHARS: usize = 48;

/// URL templates per set (the host configures them; the defaults are in docs/context-sets.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FooterLinks {
    /// `{path}` is replaced by the URL-encoded item.
    pub files: Option<String>,
    /// `{slug}` by the applet's slug, `{params}` by `&key=value…` of its parameters (encoded).
    pub applet: Option<String>,
}

impl Default for FooterLinks {
    fn default() -> Self {
        Self {
            files: Some("/?applet=text-editor&path={path}".to_owned()),
            applet: Some("/?applet={slug}{params}".to_owned()),
        }
    }
}

/// Which set an entry shows (its name, `file`, …, is the entry's `data-kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum FooterKind {
    File,
    Applet,
    Endpoint,
    Port,
    Other,
    /// "+N" for files not shown.
    More,
}

/// One entry of the footer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FooterItem {
    pub kind: FooterKind,
    /// Short text shown (a basename, `[slug]`, `host/path`, `:port`).
    pub label: String,
    /// The whole item, for the tooltip and screen readers (a port's: the port alone, which the
    /// widget puts in words).
    pub title: String,
    /// A safe link, if there is one.
    pub href: Option<String>,
}

/// The footer's entries for `sets` (empty when there is nothing to show: the footer hides).
pub fn footer_items(sets: &ContextSets, links: &FooterLinks) -> Vec<FooterItem> {
    let mut out = Vec::new();
    if let Some(files) = sets.get("files") {
        for path in files.iter().take(MAX_FILES_SHOWN) {
            let base = path
                .trim_end_matches('/')
                .rsplit(['/', '\\'])
                .next()
                .filter(|b| !b.is_empty())
                .unwrap_or(path);
            out.push(FooterItem {
                kind: FooterKind::File,
                label: shorten(base),
                title: path.clone(),
                href: links
                    .files
                    .as_ref()
                    .and_then(|t| safe_href(&t.replace("{path}", &encode(path)))),
            });
        }
        if files.len() > MAX_FILES_SHOWN {
            let rest = files.len() - MAX_FILES_SHOWN;
            out.push(FooterItem {
                kind: FooterKind::More,
                label: format!("+{rest}"),
                title: files[MAX_FILES_SHOWN..].join("\n"),
                href: None,
            });
        }
    }
    if let Some((slug, params)) = sets.get("applet").and_then(|a| a.split_first()) {
        let query: String = params
            .iter()
            .map(|p| match p.split_once('=') {
                Some((k, v)) => format!("&{}={}", encode(k), encode(v)),
                None => format!("&{}", encode(p)),
            })
            .collect();
        out.push(FooterItem {
            kind: FooterKind::Applet,
            label: format!("[{}]", shorten(slug)),
            title: std::iter::once(slug.as_str())
                .chain(params.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            href: links.applet.as_ref().and_then(|t| {
                safe_href(
                    &t.replace("{slug}", &encode(slug))
                        .replace("{params}", &query),
                )
            }),
        });
    }
    for url in sets.get("endpoints").into_iter().flatten() {
        let compact = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .unwrap_or(url);
        out.push(FooterItem {
            kind: FooterKind::Endpoint,
            label: shorten(compact.trim_end_matches('/')),
            title: url.clone(),
            href: safe_href(url).filter(|h| h.starts_with("http")),
        });
    }
    for port in sets.get("ports").into_iter().flatten() {
        out.push(FooterItem {
            kind: FooterKind::Port,
            label: format!(":{}", shorten(port.trim_start_matches(':'))),
            title: port.clone(),
            href: None,
        });
    }
    for (name, items) in sets {
        if ["files", "applet", "endpoints", "ports"].contains(&name.as_str()) || items.is_empty() {
            continue;
        }
        out.push(FooterItem {
            kind: FooterKind::Other,
            label: format!("{}: {}", shorten(name), items.len()),
            title: format!("{name}: {}", items.join(", ")),
            href: None,
        });
    }
    out
}

/// Page-context keys whose value changed between the previous user message and this one (names
/// only; the footer shows them as chips): keys added or changed, then the ones `now` no longer has.
pub fn changed_page_keys(before: Option<&PageContext>, now: Option<&PageContext>) -> Vec<String> {
    let (empty_before, empty_now) = (PageContext::new(), PageContext::new());
    let (before, now) = (before.unwrap_or(&empty_before), now.unwrap_or(&empty_now));
    let changed = now
        .iter()
        .filter(|(k, v)| before.get(k.as_str()) != Some(v))
        .map(|(k, _)| k.clone());
    let removed = before
        .keys()
        .filter(|k| !now.contains_key(k.as_str()))
        .cloned();
    changed.chain(removed).collect()
}

/// `href` if it is an http(s) URL or a same-site relative one (`/x`, `?x`, `#x`, `x/y`), else
/// `None`: no `javascript:`, `data:` or other scheme, no protocol-relative `//host`.
pub fn safe_href(href: &str) -> Option<String> {
    let h = href.trim();
    if h.is_empty() || h.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return None;
    }
    let lower = h.to_ascii_lowercase();
    if lower.starts_with("https://") || lower.starts_with("http://") {
        return Some(h.to_owned());
    }
    if h.starts_with("//") || h.starts_with("/\\") || h.starts_with('\\') {
        return None;
    }
    // A scheme is letters, digits, '+', '-', '.' before the first ':' that comes before any '/?#'.
    let before = h.split(['/', '?', '#']).next().unwrap_or("");
    if before.contains(':') {
        return None;
    }
    Some(h.to_owned())
}

/// Percent-encodes everything but unreserved characters and '/'.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn shorten(s: &str) -> String {
    shorten_to(s, MAX_LABEL_CHARS)
}

/// `s` cut to at most `max` characters (≥ 1), ending in "…" when cut.
pub fn shorten_to(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(pairs: &[(&str, &[&str])]) -> ContextSets {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    #[test]
    fn files_show_as_basenames_with_links_and_the_rest_as_a_count() {
        let s = sets(&[(
            "files",
            &[
                "/docs/spec.md",
                "notes.md",
                "/a/b/c.rs",
                "/d.txt",
                "/e.txt",
                "/f.txt",
                "/g.txt",
            ],
        )]);
        let items = footer_items(&s, &FooterLinks::default());
        let labels: Vec<&str> = items.iter().map(|i| i.label.as_str()).collect();
        assert_eq!(
            labels,
            ["spec.md", "notes.md", "c.rs", "d.txt", "e.txt", "+2"]
        );
        assert_eq!(
            items[0].href.as_deref(),
            Some("/?applet=text-editor&path=/docs/spec.md")
        );
        assert_eq!(items[0].title, "/docs/spec.md");
    }

    #[test]
    fn applet_endpoints_and_ports_are_compact() {
        let s = sets(&[
            ("applet", &["git-diff", "file=src/a b.rs"]),
            ("endpoints", &["https://api.example.com/v1/"]),
            ("ports", &["8080"]),
        ]);
        let items = footer_items(&s, &FooterLinks::default());
        assert_eq!(items[0].label, "[git-diff]");
        assert_eq!(
            items[0].href.as_deref(),
            Some("/?applet=git-diff&file=src/a%20b.rs")
        );
        assert_eq!(items[1].label, "api.example.com/v1");
        assert_eq!(
            items[1].href.as_deref(),
            Some("https://api.example.com/v1/")
        );
        assert_eq!(items[2].label, ":8080");
        assert!(footer_items(&ContextSets::new(), &FooterLinks::default()).is_empty());
    }

    #[test]
    fn hostile_items_never_make_a_dangerous_link() {
        let s = sets(&[
            (
                "endpoints",
                &[
                    "javascript:alert(1)",
                    "data:text/html,<script>",
                    "//evil.example/x",
                ],
            ),
            ("files", &["\"><img src=x onerror=alert(1)>.md"]),
        ]);
        let items = footer_items(&s, &FooterLinks::default());
        for i in &items {
            if i.kind == FooterKind::Endpoint {
                assert_eq!(i.href, None, "{i:?}");
            }
        }
        let file = items.iter().find(|i| i.kind == FooterKind::File).unwrap();
        let href = file.href.as_deref().unwrap();
        assert!(!href.contains('"') && !href.contains('<'), "{href}");
        for bad in [
            "javascript:x",
            " JAVASCRIPT:x",
            "vbscript:x",
            "//x",
            "/\\x",
            "a b",
            "data:x",
        ] {
            assert_eq!(safe_href(bad), None, "{bad}");
        }
        for good in ["/x?y=1", "?a", "#b", "docs/x.md", "https://ok.example/a:b"] {
            assert!(safe_href(good).is_some(), "{good}");
        }
        // A host template that is itself unsafe produces no link.
        let links = FooterLinks {
            files: Some("javascript:open('{path}')".into()),
            applet: None,
        };
        assert!(
            footer_items(&sets(&[("files", &["/a.md"])]), &links)[0]
                .href
                .is_none()
        );
    }

    #[test]
    fn changed_page_keys_name_what_changed_this_turn() {
        let ctx = |v: serde_json::Value| v.as_object().cloned();
        let before = ctx(serde_json::json!({"page": "home", "cart": [1], "user": "a"}));
        let now = ctx(serde_json::json!({"page": "detail", "cart": [1], "entity": "x"}));
        assert_eq!(
            changed_page_keys(before.as_ref(), now.as_ref()),
            ["entity", "page", "user"]
        );
        assert!(changed_page_keys(now.as_ref(), now.as_ref()).is_empty());
        assert_eq!(
            changed_page_keys(None, now.as_ref()).len(),
            3,
            "the first turn: all new"
        );
        assert_eq!(
            changed_page_keys(before.as_ref(), None).len(),
            3,
            "context dropped"
        );
    }

    #[test]
    fn long_labels_are_cut() {
        let long = format!("/{}.md", "n".repeat(2000));
        let items = footer_items(
            &sets(&[("files", &[long.as_str()])]),
            &FooterLinks::default(),
        );
        assert_eq!(items[0].label.chars().count(), MAX_LABEL_CHARS);
        assert!(items[0].label.ends_with('…'));
    }
}
