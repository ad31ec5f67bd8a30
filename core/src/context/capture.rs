//! Idle capture of the host page's URL into a context set (docs/context-sets.md): when the
//! query names an applet, the set becomes `[slug, "key=value", …]` of the other parameters. The rule
//! (which parameter, which set) is the host's; by default `applet` into `applet`. Pure: the widget
//! reads `location.search` and sends what this returns when nothing has streamed for a while.

use super::sets::{MAX_ITEMS_PER_SET, validate_set};

/// Which query parameter names the thing to capture, and into which set it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureRule {
    pub param: String,
    pub set_name: String,
}

impl Default for CaptureRule {
    fn default() -> Self {
        Self {
            param: "applet".to_owned(),
            set_name: "applet".to_owned(),
        }
    }
}

/// A `capture` attribute that is not `off`, `PARAM` or `PARAM:SET`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "capture rule {0:?}: use \"off\", \"PARAM\" or \"PARAM:SET\" (names of letters, digits, '-' and '_')"
)]
pub struct CaptureRuleError(pub String);

impl CaptureRule {
    /// The rule an element attribute asks for: unset → `applet` into `applet`, `off` → none,
    /// `PARAM` → that parameter into the set of the same name, `PARAM:SET` → into `SET`.
    pub fn parse(attr: Option<&str>) -> Result<Option<Self>, CaptureRuleError> {
        let Some(attr) = attr.map(str::trim).filter(|a| !a.is_empty()) else {
            return Ok(Some(Self::default()));
        };
        if attr.eq_ignore_ascii_case("off") {
            return Ok(None);
        }
        let (param, set) = attr.split_once(':').unwrap_or((attr, attr));
        // Parameter and set names follow the set-name rules.
        if validate_set(param, &[]).is_err() || validate_set(set, &[]).is_err() {
            return Err(CaptureRuleError(attr.to_owned()));
        }
        Ok(Some(Self {
            param: param.to_owned(),
            set_name: set.to_owned(),
        }))
    }

    /// The set's items for a URL query (`?a=b&c=d`, the `?` optional): the rule's parameter first,
    /// then `key=value` of the others in order; `None` when the parameter is absent, empty or itself
    /// refused (the set is left as it is). Other parameters a set would refuse (too long, control
    /// characters) are skipped, and so are those that look like credentials or personal data
    /// (`token`, `code`, `key`, `password`, `email`, … in the name): a URL's secrets must not
    /// reach the server, the model or the footer. At most a set's worth are kept.
    pub fn capture(&self, query: &str) -> Option<Vec<String>> {
        let query = query.strip_prefix('?').unwrap_or(query);
        let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let acceptable =
            |item: &String| validate_set(&self.set_name, std::slice::from_ref(item)).is_ok();
        // A refused head captures nothing rather than a list that starts with something else.
        let head = pairs
            .iter()
            .find(|(k, _)| *k == self.param)
            .map(|(_, v)| v.clone())
            .filter(acceptable)?;
        let rest = pairs
            .into_iter()
            .filter(|(k, _)| *k != self.param && !looks_sensitive(k))
            .map(|(k, v)| format!("{k}={v}"))
            .filter(acceptable);
        Some(
            std::iter::once(head)
                .chain(rest)
                .take(MAX_ITEMS_PER_SET)
                .collect(),
        )
    }
}

/// Parameter names that usually carry credentials or personal data (OAuth `code`/`state`, access
/// tokens, signatures, e-mail addresses); matched case-insensitively anywhere in the name.
const SENSITIVE: [&str; 14] = [
    "token",
    "code",
    "state",
    "secret",
    "key",
    "password",
    "passwd",
    "auth",
    "session",
    "sig",
    "email",
    "mail",
    "jwt",
    "credential",
];

fn looks_sensitive(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SENSITIVE.iter().any(|s| name.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_applet_capture_by_default() {
        let rule = CaptureRule::parse(None).unwrap().unwrap();
        assert_eq!(
            rule.capture("?applet=git-diff&file=src%2Fa%20b.rs&staged=1"),
            Some(vec![
                "git-diff".to_owned(),
                "file=src/a b.rs".to_owned(),
                "staged=1".to_owned()
            ])
        );
        assert_eq!(
            rule.capture("?file=x"),
            None,
            "no applet: nothing to capture"
        );
        assert_eq!(rule.capture("applet="), None);
        assert_eq!(rule.capture(""), None);
    }

    #[test]
    fn the_host_names_the_parameter_and_set_or_turns_it_off() {
        assert_eq!(CaptureRule::parse(Some("off")), Ok(None));
        let rule = CaptureRule::parse(Some("doc:files")).unwrap().unwrap();
        assert_eq!(
            (rule.param.as_str(), rule.set_name.as_str()),
            ("doc", "files")
        );
        assert_eq!(
            rule.capture("doc=%2Fdocs%2Fspec.md&x=1"),
            Some(vec!["/docs/spec.md".to_owned(), "x=1".to_owned()])
        );
        let same = CaptureRule::parse(Some("view")).unwrap().unwrap();
        assert_eq!(same.set_name, "view");
        for bad in ["a b", "x:", ":y", "<script>", "a:b:c"] {
            assert!(CaptureRule::parse(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn secrets_in_the_url_are_never_captured() {
        let rule = CaptureRule::default();
        let items = rule
            .capture("applet=git-diff&file=a.rs&access_token=abc&code=xyz&state=s&API_KEY=k&userEmail=a%40b.c&X-Amz-Signature=q")
            .unwrap();
        assert_eq!(items, ["git-diff", "file=a.rs"]);
    }

    #[test]
    fn hostile_queries_are_bounded_and_cleaned() {
        let rule = CaptureRule::default();
        let long = "x".repeat(5_000);
        let many: String = (0..40).map(|i| format!("&k{i}=v")).collect();
        let items = rule
            .capture(&format!("applet=ok&big={long}&bidi=%E2%80%AE{many}"))
            .unwrap();
        assert_eq!(items[0], "ok");
        assert_eq!(items.len(), MAX_ITEMS_PER_SET);
        assert!(
            items
                .iter()
                .all(|i| i.len() < 100 && !i.contains('\u{202e}'))
        );
        // A slug that is itself refused captures nothing rather than a shifted list.
        assert_eq!(rule.capture("applet=%E2%80%AEevil&k=v"), None);
    }
}
