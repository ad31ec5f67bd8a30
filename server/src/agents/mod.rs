//! Agents as the operator configures them: a TOML file (`GLASSBOX_CONFIG`, else `glassbox.toml` in
//! the working directory when present) with `[[agents]]` tables, each naming a folder of markdown
//! items (rules and references, `items`). Everything is read and checked at start; a bad file is
//! an error naming the file and the line. [`AgentCatalog`] holds what was read and reads it again
//! when a file changes.

mod file;
mod items;
pub mod mcp_servers;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

pub use items::{Item, Memo};
pub use mcp_servers::McpServerConfig;

/// How long a tool call waits for the user's answer when no agent says otherwise.
pub const DEFAULT_APPROVAL_TIMEOUT: std::time::Duration =
    std::time::Duration::from_millis(file::DEFAULT_APPROVAL_TIMEOUT_MS);

/// A configuration file that cannot be used: which file, which line (1-based, when known), why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct AgentConfigError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

impl AgentConfigError {
    fn new(file: &Path, line: Option<usize>, message: impl Into<String>) -> Self {
        Self {
            file: file.to_owned(),
            line,
            message: message.into(),
        }
    }
}

/// One agent: its prompt, model, defaults and items.
#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    pub name: String,
    pub system_prompt: Option<String>,
    /// The model its sessions use unless the client asks for another allowed one.
    pub model: Option<String>,
    pub defaults: glassbox_core::context::agent_settings::AgentSettings,
    /// The folder its items are read from.
    pub items_dir: Option<PathBuf>,
    /// Rules and references, by priority (lower first), then name; shared with every turn that
    /// offers them, so what a turn works out of an item once (its search key) stays.
    pub items: Vec<std::sync::Arc<Item>>,
    /// The MCP servers whose tools it offers, in the file's order.
    pub mcp_servers: Vec<McpServerConfig>,
    /// How long a tool call waits for the user's answer before it counts as denied.
    pub approval_timeout: std::time::Duration,
    /// What its chats show before the first message (placeholder, welcome, starters).
    pub greeting: glassbox_core::wire::Greeting,
}

impl Agent {
    /// The item called `name`.
    pub fn item(&self, name: &str) -> Option<&Item> {
        self.items.iter().find(|i| i.name() == name).map(|i| &**i)
    }
}

/// The agents of one reading of the configuration, in the file's order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Agents {
    agents: Vec<Arc<Agent>>,
}

impl Agents {
    /// Reads the configuration file and every item folder it names.
    pub fn load(file: &Path) -> Result<Self, AgentConfigError> {
        Self::load_with(file, &|name| std::env::var(name).ok())
    }

    /// [`Agents::load`] with `${VAR}`s filled in from `lookup` instead of the environment.
    pub fn load_with(
        file: &Path,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, AgentConfigError> {
        let agents = file::read(file, lookup)?;
        Ok(Self {
            agents: agents.into_iter().map(Arc::new).collect(),
        })
    }

    /// The agent called `name`; the first one when `name` is `None`; `None` when there is no
    /// such agent (or no agent at all).
    pub fn pick(&self, name: Option<&str>) -> Option<&Arc<Agent>> {
        match name {
            Some(n) => self.agents.iter().find(|a| a.name == n),
            None => self.agents.first(),
        }
    }

    /// Every agent, in the file's order.
    pub fn all(&self) -> &[Arc<Agent>] {
        &self.agents
    }

    /// Whether no agent is configured.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }
}

/// The agents the server runs with, read again when their files change. Clones share one catalog.
#[derive(Clone, Default)]
pub struct AgentCatalog {
    inner: Arc<RwLock<CatalogState>>,
}

#[derive(Default)]
struct CatalogState {
    file: Option<PathBuf>,
    agents: Arc<Agents>,
    /// What the files looked like when they were read (path → modified time and length).
    stamps: BTreeMap<PathBuf, (Option<SystemTime>, u64)>,
}

/// What a reload changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reloaded {
    /// Items (agent, item name) that are new, changed or gone since the last reading.
    pub changed: Vec<(String, String)>,
}

impl AgentCatalog {
    /// Reads `file` (none: no agents).
    pub fn open(file: Option<&Path>) -> Result<Self, AgentConfigError> {
        let catalog = Self::default();
        if let Some(file) = file {
            let agents = Agents::load(file)?;
            let mut state = catalog.write();
            state.stamps = stamps(file, &agents);
            state.file = Some(file.to_owned());
            state.agents = Arc::new(agents);
        }
        Ok(catalog)
    }

    /// A catalog of `agents` that reads no file (tests, embedding).
    pub fn fixed(agents: Agents) -> Self {
        let catalog = Self::default();
        catalog.write().agents = Arc::new(agents);
        catalog
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, CatalogState> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, CatalogState> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The agents as last read.
    pub fn current(&self) -> Arc<Agents> {
        self.read().agents.clone()
    }

    /// Whether a file the catalog was read from changed since (the configuration, an item folder
    /// or an item file: added, removed, modified).
    pub fn stale(&self) -> bool {
        let state = self.read();
        let Some(file) = &state.file else {
            return false;
        };
        stamps(file, &state.agents) != state.stamps
    }

    /// Reads the files again. On success the new agents replace the old and the items that
    /// changed are returned; on failure the old agents stay and the error says where.
    pub fn reload(&self) -> Result<Reloaded, AgentConfigError> {
        let (file, old) = {
            let state = self.read();
            let Some(file) = state.file.clone() else {
                return Ok(Reloaded::default());
            };
            (file, state.agents.clone())
        };
        // Stamped before reading, so an edit made while the files are read shows as a change
        // next time; stamped on failure too, so a broken file is read again only once it changes.
        let before = stamps(&file, &old);
        let agents = match Agents::load(&file) {
            Ok(agents) => agents,
            Err(e) => {
                self.write().stamps = before;
                return Err(e);
            }
        };
        let changed = changed_items(&old, &agents);
        let mut state = self.write();
        // The new agents' folders may differ from the old ones': those count from now on.
        state.stamps = stamps(&file, &agents)
            .into_iter()
            .map(|(path, stamp)| {
                let seen = before.get(&path).copied().unwrap_or(stamp);
                (path, seen)
            })
            .collect();
        state.agents = Arc::new(agents);
        Ok(Reloaded { changed })
    }
}

/// The items that differ between two readings: new, changed (any field) or gone.
fn changed_items(old: &Agents, new: &Agents) -> Vec<(String, String)> {
    let index = |agents: &Agents| -> BTreeMap<(String, String), std::sync::Arc<Item>> {
        agents
            .all()
            .iter()
            .flat_map(|a| {
                a.items
                    .iter()
                    .map(|i| ((a.name.clone(), i.name().to_owned()), i.clone()))
            })
            .collect()
    };
    let (old, new) = (index(old), index(new));
    let mut keys: Vec<&(String, String)> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| old.get(*k) != new.get(*k))
        .cloned()
        .collect()
}

/// The modified time and length of the configuration file, every item folder and every file in
/// them: a change to any shows as a different map.
fn stamps(file: &Path, agents: &Agents) -> BTreeMap<PathBuf, (Option<SystemTime>, u64)> {
    let stamp = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| (m.modified().ok(), m.len()))
            .unwrap_or((None, 0))
    };
    let mut out = BTreeMap::new();
    out.insert(file.to_owned(), stamp(file));
    let mut dirs: Vec<PathBuf> = agents
        .all()
        .iter()
        .filter_map(|a| a.items_dir.clone())
        .collect();
    dirs.sort();
    dirs.dedup();
    for dir in dirs {
        out.insert(dir.clone(), stamp(&dir));
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let path = entry.path();
                out.insert(path.clone(), stamp(&path));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, text).unwrap();
    }

    fn item(name: &str, include: &str) -> String {
        format!("---\ntype: rule\nname: {name}\ninclude: {include}\n---\nThe text of {name}.\n")
    }

    #[test]
    fn the_repositorys_demo_agent_reads_with_a_dozen_references() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../glassbox.toml");
        let agents = Agents::load(&file).unwrap();
        let demo = agents.pick(None).unwrap();
        assert_eq!(demo.name, "demo");
        use glassbox_core::context::items::{IncludeMode, ItemKind};
        let count = |kind: ItemKind| {
            demo.items
                .iter()
                .filter(|i| i.meta.item.kind == kind)
                .count()
        };
        assert!(count(ItemKind::Rule) >= 4, "{demo:?}");
        assert!(count(ItemKind::Reference) >= 12, "{demo:?}");
        let has = |mode: IncludeMode| demo.items.iter().any(|i| i.meta.include == mode);
        assert!(has(IncludeMode::Agent) && has(IncludeMode::Always));
    }

    #[test]
    fn defaults_apply_and_the_first_agent_is_picked_when_none_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("glassbox.toml");
        write(
            &file,
            "[[agents]]\nname = \"a\"\n\n[[agents]]\nname = \"b\"\nitems = \"b-items\"\ntemperature = 0.2\ncontext_top_n = 2\n",
        );
        write(&dir.path().join("b-items/x.md"), &item("X", "agent"));
        let agents = Agents::load(&file).unwrap();
        assert_eq!(agents.pick(None).unwrap().name, "a");
        let b = agents.pick(Some("b")).unwrap();
        assert_eq!(b.defaults.temperature, Some(0.2));
        assert_eq!(b.defaults.context_top_n, 2);
        assert_eq!(b.defaults.context_top_k, 20);
        assert_eq!(b.defaults.context_include_score, 0.7);
        assert_eq!(b.defaults.max_chat_turns, 10);
        assert_eq!(b.defaults.context_expansion_depth, 0);
        assert_eq!(
            b.defaults.tool_permission,
            glassbox_core::context::agent_settings::ToolPermission::Ask
        );
        assert_eq!(b.items.len(), 1);
        assert!(agents.pick(Some("c")).is_none());
    }

    #[test]
    fn a_bad_configuration_names_the_file_and_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("glassbox.toml");
        let cases = [
            (
                "[[agents]]\nname = \"a\"\ntemprature = 0.5\n",
                Some(3),
                "unknown field `temprature`",
            ),
            (
                "[[agents]]\nname = \"a\"\n\n[[agents]]\nname = \"a\"\n",
                Some(4),
                "configured twice",
            ),
            (
                "[[agents]]\nname = \"a\"\ntemperature = 3.0\n",
                Some(1),
                "temperature",
            ),
            (
                "[[agents]]\nname = \"a\"\ncontext_top_k = 0\n",
                Some(1),
                "context_top_k",
            ),
            (
                "[[agents]]\nname = \"a\"\nitems = \"nowhere\"\n",
                Some(1),
                "does not exist",
            ),
            (
                "[[agents]]\nname = \"a\"\ntool_permission = \"maybe\"\n",
                Some(3),
                "maybe",
            ),
            ("[[agents]\nname = \"a\"\n", Some(1), ""),
            ("# nothing\n", None, "no [[agents]]"),
        ];
        for (text, line, says) in cases {
            write(&file, text);
            let e = Agents::load(&file).unwrap_err();
            assert_eq!(e.file, file, "{text}");
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.message.contains(says), "{text}: {e}");
        }
        let e = Agents::load(&dir.path().join("missing.toml")).unwrap_err();
        assert!(e.message.contains("cannot be read"), "{e}");
    }

    #[test]
    fn a_bad_item_file_is_an_error_of_the_whole_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("glassbox.toml");
        write(&file, "[[agents]]\nname = \"a\"\nitems = \"items\"\n");
        let bad = dir.path().join("items/bad.md");
        write(
            &bad,
            "---\ntype: rule\nname: X\npriority: high\n---\nText\n",
        );
        let e = Agents::load(&file).unwrap_err();
        assert_eq!((e.file.clone(), e.line), (bad, Some(4)), "{e}");
    }

    #[test]
    fn a_reload_reports_what_changed_and_keeps_the_old_agents_when_a_file_breaks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("glassbox.toml");
        write(&file, "[[agents]]\nname = \"a\"\nitems = \"items\"\n");
        write(&dir.path().join("items/x.md"), &item("X", "agent"));
        write(&dir.path().join("items/y.md"), &item("Y", "always"));
        let catalog = AgentCatalog::open(Some(&file)).unwrap();
        assert!(!catalog.stale());
        assert_eq!(catalog.reload().unwrap(), Reloaded::default());

        write(
            &dir.path().join("items/x.md"),
            "---\ntype: rule\nname: X\ninclude: agent\n---\nNew text.\n",
        );
        std::fs::remove_file(dir.path().join("items/y.md")).unwrap();
        write(&dir.path().join("items/z.md"), &item("Z", "manual"));
        assert!(catalog.stale());
        let changed = catalog.reload().unwrap().changed;
        let names: Vec<&str> = changed.iter().map(|(_, n)| n.as_str()).collect();
        assert_eq!(names, ["X", "Y", "Z"]);
        assert!(changed.iter().all(|(a, _)| a == "a"));
        assert_eq!(
            catalog
                .current()
                .pick(None)
                .unwrap()
                .item("X")
                .unwrap()
                .text,
            "New text."
        );
        assert!(!catalog.stale());

        write(&dir.path().join("items/z.md"), "no front matter\n");
        let e = catalog.reload().unwrap_err();
        assert_eq!(e.line, Some(1));
        assert!(catalog.current().pick(None).unwrap().item("Z").is_some());
    }

    #[test]
    fn mcp_servers_are_read_with_their_variables_and_bad_ones_name_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("glassbox.toml");
        let lookup = |name: &str| (name == "KEY").then(|| "k-1".to_owned());
        write(
            &file,
            "[[agents]]\nname = \"a\"\n\n[[agents.mcp_servers]]\nname = \"clock\"\ncommand = \"clockd\"\nargs = [\"--key\", \"${KEY}\"]\ninclude = \"agent\"\ndeny = [\"reset\"]\n\n[agents.mcp_servers.tools.now]\ninclude = \"always\"\n\n[[agents.mcp_servers]]\nname = \"web\"\nurl = \"https://mcp.example/${KEY}\"\nheaders = { Authorization = \"Bearer ${KEY}\" }\ncall_timeout_ms = 5000\n",
        );
        let agents = Agents::load_with(&file, &lookup).unwrap();
        let servers = &agents.pick(None).unwrap().mcp_servers;
        assert_eq!(servers.len(), 2);
        let clock = &servers[0];
        assert_eq!(
            clock.transport,
            mcp_servers::Transport::Stdio {
                command: "clockd".into(),
                args: vec!["--key".into(), "k-1".into()],
                env: BTreeMap::new(),
            }
        );
        use glassbox_core::context::items::IncludeMode;
        assert_eq!(clock.include_of("now"), IncludeMode::Always);
        assert_eq!(clock.include_of("zone"), IncludeMode::Agent);
        assert!(clock.denies("reset") && !clock.auto_approves("reset"));
        let web = &servers[1];
        let mcp_servers::Transport::Http { url, headers } = &web.transport else {
            panic!("{web:?}");
        };
        assert_eq!(url, "https://mcp.example/k-1");
        assert_eq!(headers["Authorization"], "Bearer k-1");
        assert_eq!(web.call_timeout.as_millis(), 5000);
        assert_eq!(web.call_timeout_max.as_millis(), 600_000);
        assert_eq!(web.include_of("x"), IncludeMode::Always);

        let head = "[[agents]]\nname = \"a\"\n[[agents.mcp_servers]]\nname = \"s\"\n";
        let cases = [
            (
                "command = \"x\"\nargs = [\n  \"${UNSET_VAR}\",\n]\n",
                7,
                "UNSET_VAR is not set",
            ),
            ("url = \"ftp://x\"\n", 5, "not an http"),
            (
                "command = \"x\"\nurl = \"http://x\"\n",
                3,
                "either `command`",
            ),
            ("\n", 3, "either `command`"),
            ("command = \"x\"\nport = 1\n", 6, "unknown field `port`"),
            (
                "command = \"x\"\ncall_timeout_ms = 0\n",
                3,
                "call_timeout_ms",
            ),
            (
                "command = \"x\"\n[[agents.mcp_servers]]\nname = \"s\"\ncommand = \"y\"\n",
                6,
                "configured twice",
            ),
        ];
        for (rest, line, says) in cases {
            write(&file, &format!("{head}{rest}"));
            let e = Agents::load_with(&file, &lookup).unwrap_err();
            assert_eq!(e.line, Some(line), "{rest}: {e}");
            assert!(e.to_string().contains(says), "{rest}: {e}");
        }
        write(
            &file,
            "[[agents]]\nname = \"a\"\n[[agents.mcp_servers]]\nname = \"a.b\"\ncommand = \"x\"\n",
        );
        let e = Agents::load_with(&file, &lookup).unwrap_err();
        assert!(e.message.contains("letters, digits"), "{e}");
    }

    #[test]
    fn no_file_means_no_agents() {
        let catalog = AgentCatalog::open(None).unwrap();
        assert!(catalog.current().is_empty());
        assert!(!catalog.stale());
        assert_eq!(catalog.reload().unwrap(), Reloaded::default());
    }
}
