//! An agent's MCP servers as the operator writes them (`[[agents.mcp_servers]]`): how to reach
//! each (a command over stdio, or a URL over streamable HTTP), how its tools reach requests, and
//! what the user is asked. Values may name environment variables as `${VAR}` (an unset one is an
//! error naming the file and the value's line) or `${VAR:-default}`. docs/agents.md lists every key.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use glassbox_core::context::items::IncludeMode;
use serde::Deserialize;

use super::AgentConfigError;

/// How long a call may run before it is cancelled, unless the server reports progress.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 60_000;
/// How long a call may run however much progress the server reports.
pub const DEFAULT_CALL_TIMEOUT_MAX_MS: u64 = 600_000;
/// Longest server name: the offered names join it with the tool's (`{server}__{tool}`).
pub const MAX_SERVER_NAME: usize = 32;

/// How the server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking MCP on its standard input and output.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Set for the child on top of the server's own environment.
        env: BTreeMap<String, String>,
    },
    /// A server at a URL speaking MCP's streamable HTTP.
    Http {
        url: String,
        /// Sent with every request (an `Authorization` header, say).
        headers: BTreeMap<String, String>,
    },
}

/// One MCP server of an agent, checked and with its `${VAR}`s filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    /// Unique in the agent; letters, digits, `-` and `_`.
    pub name: String,
    pub transport: Transport,
    /// How its tools reach requests unless a tool says otherwise (`None`: `always`).
    pub include: Option<IncludeMode>,
    /// Per tool, by the server's own tool name.
    pub tools: BTreeMap<String, IncludeMode>,
    /// A call's timeout, restarted by each progress notification …
    pub call_timeout: Duration,
    /// … up to this much in all.
    pub call_timeout_max: Duration,
    /// Tools (the server's names) that run unasked when the session's permission is `ask`.
    pub auto_approve: Vec<String>,
    /// Tools (the server's names) never offered; wins over `auto_approve`.
    pub deny: Vec<String>,
    /// Whether its tools' annotations (`readOnlyHint`, …) are believed; otherwise they are the
    /// server's claims only, shown but never acted on.
    pub trust_annotations: bool,
}

impl McpServerConfig {
    /// The include mode of the server's tool `tool`: its own, else the server's, else `always`.
    pub fn include_of(&self, tool: &str) -> IncludeMode {
        IncludeMode::for_tool(self.tools.get(tool).copied(), self.include)
    }

    /// Whether the operator never offers `tool`.
    pub fn denies(&self, tool: &str) -> bool {
        self.deny.iter().any(|t| t == tool)
    }

    /// Whether `tool` runs unasked under `ask` (and is not denied).
    pub fn auto_approves(&self, tool: &str) -> bool {
        !self.denies(tool) && self.auto_approve.iter().any(|t| t == tool)
    }
}

type Value = toml::Spanned<String>;

/// An `[[agents.mcp_servers]]` table as written (every key known).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpServerShape {
    name: String,
    command: Option<Value>,
    #[serde(default)]
    args: Vec<Value>,
    #[serde(default)]
    env: BTreeMap<String, Value>,
    url: Option<Value>,
    #[serde(default)]
    headers: BTreeMap<String, Value>,
    include: Option<IncludeMode>,
    #[serde(default)]
    tools: BTreeMap<String, ToolShape>,
    call_timeout_ms: Option<u64>,
    call_timeout_max_ms: Option<u64>,
    #[serde(default)]
    auto_approve: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    trust_annotations: bool,
}

/// `[agents.mcp_servers.tools.NAME]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolShape {
    include: IncludeMode,
}

/// Why a `${VAR}` could not be filled in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("environment variable {0} is not set")]
    Unset(String),
    #[error("`${{` without a closing `}}` (write `$${{` for a literal `${{`)")]
    Unclosed,
    #[error("{0:?} is not an environment variable's name")]
    BadName(String),
}

/// `value` with each `${NAME}` replaced by `lookup(NAME)`, and each `${NAME:-default}` by
/// `lookup(NAME)` or, when unset or empty, `default`; `$${` stands for a literal `${`.
pub fn expand(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(literal) = after.strip_prefix("${") {
            out.push_str("${");
            rest = literal;
        } else if let Some(named) = after.strip_prefix('{') {
            let end = named.find('}').ok_or(ExpandError::Unclosed)?;
            let (name, default) = match named[..end].split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (&named[..end], None),
            };
            let valid = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(ExpandError::BadName(name.to_owned()));
            }
            let value = match (lookup(name), default) {
                (Some(v), Some(d)) if v.is_empty() => d.to_owned(),
                (Some(v), _) => v,
                (None, Some(d)) => d.to_owned(),
                (None, None) => return Err(ExpandError::Unset(name.to_owned())),
            };
            out.push_str(&value);
            rest = &named[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

impl McpServerShape {
    /// Checks the table of agent `agent` (at `line` of `file`; `line_of` gives the line of a byte
    /// offset in the file) and fills in its `${VAR}`s with `lookup`.
    pub(super) fn resolve(
        self,
        agent: &str,
        (file, line, line_of): (&Path, usize, &dyn Fn(usize) -> usize),
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<McpServerConfig, AgentConfigError> {
        let fail = |line: usize, message: String| {
            AgentConfigError::new(
                file,
                Some(line),
                format!("agent {agent:?}, MCP server {:?}: {message}", self.name),
            )
        };
        let valid_name = !self.name.is_empty()
            && self.name.len() <= MAX_SERVER_NAME
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid_name {
            return Err(fail(
                line,
                format!("a server's name is 1 to {MAX_SERVER_NAME} letters, digits, `-` or `_`"),
            ));
        }
        let fill = |v: &Value| {
            expand(v.get_ref(), lookup).map_err(|e| fail(line_of(v.span().start), e.to_string()))
        };
        let fill_map = |m: &BTreeMap<String, Value>| {
            m.iter()
                .map(|(k, v)| Ok((k.clone(), fill(v)?)))
                .collect::<Result<BTreeMap<_, _>, AgentConfigError>>()
        };
        let transport = match (&self.command, &self.url) {
            (Some(command), None) => {
                if !self.headers.is_empty() {
                    return Err(fail(line, "`headers` go with `url`, not `command`".into()));
                }
                Transport::Stdio {
                    command: fill(command)?,
                    args: self.args.iter().map(fill).collect::<Result<_, _>>()?,
                    env: fill_map(&self.env)?,
                }
            }
            (None, Some(url)) => {
                if !self.args.is_empty() || !self.env.is_empty() {
                    return Err(fail(
                        line,
                        "`args` and `env` go with `command`, not `url`".into(),
                    ));
                }
                let url_text = fill(url)?;
                if !(url_text.starts_with("http://") || url_text.starts_with("https://")) {
                    return Err(fail(
                        line_of(url.span().start),
                        format!("{url_text:?} is not an http:// or https:// URL"),
                    ));
                }
                Transport::Http {
                    url: url_text,
                    headers: fill_map(&self.headers)?,
                }
            }
            _ => {
                return Err(fail(
                    line,
                    "give either `command` (stdio) or `url` (streamable HTTP)".into(),
                ));
            }
        };
        let call_timeout = self.call_timeout_ms.unwrap_or(DEFAULT_CALL_TIMEOUT_MS);
        let call_timeout_max = self
            .call_timeout_max_ms
            .unwrap_or(DEFAULT_CALL_TIMEOUT_MAX_MS.max(call_timeout));
        if call_timeout == 0 || call_timeout_max < call_timeout {
            return Err(fail(
                line,
                "`call_timeout_ms` must be above 0 and at most `call_timeout_max_ms`".into(),
            ));
        }
        Ok(McpServerConfig {
            name: self.name,
            transport,
            include: self.include,
            tools: self
                .tools
                .into_iter()
                .map(|(k, t)| (k, t.include))
                .collect(),
            call_timeout: Duration::from_millis(call_timeout),
            call_timeout_max: Duration::from_millis(call_timeout_max),
            auto_approve: self.auto_approve,
            deny: self.deny,
            trust_annotations: self.trust_annotations,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_are_filled_in_and_dollars_kept() {
        assert_eq!(expand("Bearer ${TOKEN}", &env).unwrap(), "Bearer s3cret");
        assert_eq!(
            expand("${TOKEN}${EMPTY}-${TOKEN}", &env).unwrap(),
            "s3cret-s3cret"
        );
        assert_eq!(
            expand("costs $5 or $${TOKEN}", &env).unwrap(),
            "costs $5 or ${TOKEN}"
        );
        assert_eq!(expand("end$", &env).unwrap(), "end$");
        assert_eq!(expand("${NOPE:-bin/x}", &env).unwrap(), "bin/x");
        assert_eq!(expand("${EMPTY:-d}|${TOKEN:-d}", &env).unwrap(), "d|s3cret");
        assert_eq!(
            expand("${NOPE}", &env),
            Err(ExpandError::Unset("NOPE".into()))
        );
        assert_eq!(expand("${TOKEN", &env), Err(ExpandError::Unclosed));
        assert_eq!(
            expand("${1X}", &env),
            Err(ExpandError::BadName("1X".into()))
        );
        assert_eq!(
            expand("${}", &env),
            Err(ExpandError::BadName(String::new()))
        );
    }
}
