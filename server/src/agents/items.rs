//! Item files: markdown with YAML front matter between `---` lines.
//!
//! ```text
//! ---
//! type: rule            # rule | reference
//! name: Cite sources    # unique in the agent
//! description: When and how to cite
//! priority: 1           # lower first (default 100)
//! include: always       # always | manual | agent (default manual)
//! ---
//! The text the model reads.
//! ```

use std::path::{Path, PathBuf};

use glassbox_core::context::items::{AgentItem, IncludeMode, ItemRef};
use serde::Deserialize;

use super::AgentConfigError;

/// A rule or reference of an agent: what the session lists and the search know of it, its text
/// and its file.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub meta: AgentItem,
    /// The markdown after the front matter.
    pub text: String,
    /// The file it was read from (`None`: an MCP server's tool).
    pub file: Option<PathBuf>,
    /// The hash the search finds its vectors by, worked out at its first search.
    pub search_key: Memo,
}

/// A value worked out once from what the item holds (an item does not change once read), and left
/// out of comparisons: two equal items would work out equal values.
#[derive(Debug, Clone, Default)]
pub struct Memo(std::sync::OnceLock<String>);

impl Memo {
    /// The value, worked out by `make` the first time.
    pub fn get_or_init(&self, make: impl FnOnce() -> String) -> &str {
        self.0.get_or_init(make)
    }
}

impl PartialEq for Memo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Item {
    /// Its name, unique in the agent.
    pub fn name(&self) -> &str {
        &self.meta.item.name
    }
}

/// An item file's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum FileType {
    Rule,
    Reference,
}

/// The front matter as written (every key known, so a typo is an error with its line).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    #[serde(rename = "type")]
    kind: FileType,
    name: String,
    description: Option<String>,
    #[serde(default = "default_priority")]
    priority: i32,
    #[serde(default = "default_include")]
    include: IncludeMode,
}

fn default_priority() -> i32 {
    100
}

fn default_include() -> IncludeMode {
    IncludeMode::Manual
}

/// Longest item file read, in bytes.
const MAX_ITEM_BYTES: u64 = 256 * 1024;

/// Reads every `*.md` file of `dir` (not its subfolders), sorted by priority, then name. Names are
/// unique: a second file with a taken name is an error naming both.
pub(super) fn read_items(dir: &Path) -> Result<Vec<Item>, AgentConfigError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| AgentConfigError::new(dir, None, format!("cannot be read: {e}")))?;
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    let mut items: Vec<Item> = Vec::with_capacity(files.len());
    for file in files {
        let item = read_item(&file)?;
        if let Some(other) = items.iter().find(|i| i.name() == item.name()) {
            return Err(AgentConfigError::new(
                &file,
                Some(name_line(&file)),
                format!(
                    "the name {:?} is taken by {}; names are unique in an agent",
                    item.name(),
                    other
                        .file
                        .as_deref()
                        .map_or_else(|| "another item".to_owned(), |f| f.display().to_string())
                ),
            ));
        }
        items.push(item);
    }
    items.sort_by(|a, b| glassbox_core::context::items::by_priority(&a.meta, &b.meta));
    Ok(items)
}

/// The line of the front matter's `name:` key (2, the first YAML line, when it cannot be found).
fn name_line(file: &Path) -> usize {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|t| {
            t.lines()
                .skip(1)
                .take_while(|l| l.trim_end() != "---")
                .position(|l| l.trim_start().starts_with("name:"))
        })
        .map_or(2, |i| i + 2)
}

/// Reads one item file.
pub(super) fn read_item(file: &Path) -> Result<Item, AgentConfigError> {
    let err = |line: Option<usize>, m: String| AgentConfigError::new(file, line, m);
    let size = std::fs::metadata(file)
        .map_err(|e| err(None, format!("cannot be read: {e}")))?
        .len();
    if size > MAX_ITEM_BYTES {
        return Err(err(
            None,
            format!("is {size} bytes; an item may have at most {MAX_ITEM_BYTES}"),
        ));
    }
    let text =
        std::fs::read_to_string(file).map_err(|e| err(None, format!("cannot be read: {e}")))?;
    let (yaml, body) = split_front_matter(&text).map_err(|(line, m)| err(Some(line), m))?;
    let front: FrontMatter = serde_yaml_ng::from_str(yaml).map_err(|e| {
        // The YAML starts on the file's second line.
        let line = e.location().map(|l| l.line() + 1);
        let message = e.to_string();
        // The crate appends " at line L column C" (of the YAML); the file's line is given apart.
        let message = message
            .split(" at line ")
            .next()
            .unwrap_or(&message)
            .to_owned();
        err(line.or(Some(2)), format!("front matter: {message}"))
    })?;
    if front.name.trim().is_empty() {
        return Err(err(
            Some(name_line(file)),
            "front matter: name is empty".to_owned(),
        ));
    }
    let body = body.trim();
    if body.is_empty() {
        return Err(err(None, "has no text after its front matter".to_owned()));
    }
    let name = front.name.trim().to_owned();
    Ok(Item {
        meta: AgentItem {
            item: match front.kind {
                FileType::Rule => ItemRef::rule(name),
                FileType::Reference => ItemRef::reference(name),
            },
            description: front.description.unwrap_or_default().trim().to_owned(),
            priority: front.priority,
            include: front.include,
            tokens: None,
        },
        text: body.to_owned(),
        file: Some(file.to_owned()),
        search_key: Memo::default(),
    })
}

/// The YAML between the opening `---` line and the closing one, and the text after it; or the
/// line and reason it cannot be found.
fn split_front_matter(text: &str) -> Result<(&str, &str), (usize, String)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        return Err((
            1,
            "must start with front matter: a line `---`, the YAML (type, name, …), then `---`"
                .to_owned(),
        ));
    }
    let start = first.len();
    let mut at = start;
    for line in lines {
        if line.trim_end() == "---" {
            return Ok((&text[start..at], &text[at + line.len()..]));
        }
        at += line.len();
    }
    Err((
        1,
        "the front matter is not closed by a `---` line".to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn an_item_reads_its_front_matter_and_text() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "a.md",
            "---\ntype: rule\nname: Cite sources\ndescription: When to cite\npriority: 1\ninclude: always\n---\n\nCite the reference you used.\n",
        );
        let item = read_item(&f).unwrap();
        assert_eq!(item.meta.item, ItemRef::rule("Cite sources"));
        assert_eq!(item.meta.description, "When to cite");
        assert_eq!(item.meta.priority, 1);
        assert_eq!(item.meta.include, IncludeMode::Always);
        assert_eq!(item.text, "Cite the reference you used.");
    }

    #[test]
    fn defaults_apply_when_priority_and_include_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "a.md",
            "---\ntype: reference\nname: X\n---\nText\n",
        );
        let item = read_item(&f).unwrap();
        assert_eq!(item.meta.item, ItemRef::reference("X"));
        assert_eq!(
            (item.meta.priority, item.meta.include),
            (100, IncludeMode::Manual)
        );
        assert_eq!(item.meta.description, "");
    }

    #[test]
    fn errors_name_the_file_and_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            (
                "no-front.md",
                "Just text\n",
                1,
                "must start with front matter",
            ),
            ("open.md", "---\ntype: rule\nname: X\n", 1, "not closed"),
            (
                "typo.md",
                "---\ntype: rule\nname: X\nincldue: always\n---\nText\n",
                4,
                "unknown field `incldue`",
            ),
            (
                "bad-type.md",
                "---\ntype: tool\nname: X\n---\nText\n",
                2,
                "unknown variant `tool`",
            ),
            (
                "bad-priority.md",
                "---\ntype: rule\nname: X\npriority: first\n---\nText\n",
                4,
                "priority",
            ),
            (
                "no-name.md",
                "---\ntype: rule\n---\nText\n",
                2,
                "missing field `name`",
            ),
        ];
        for (name, text, line, says) in cases {
            let f = write(dir.path(), name, text);
            let e = read_item(&f).unwrap_err();
            assert_eq!(e.file, f, "{name}");
            assert_eq!(e.line, Some(line), "{name}: {e}");
            assert!(e.message.contains(says), "{name}: {e}");
            assert!(
                e.to_string()
                    .starts_with(&format!("{}:{line}: ", f.display())),
                "{e}"
            );
        }
    }

    #[test]
    fn a_folder_is_read_by_priority_and_names_are_unique() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "b.md",
            "---\ntype: rule\nname: B\npriority: 2\n---\nb\n",
        );
        write(
            dir.path(),
            "a.md",
            "---\ntype: rule\nname: A\npriority: 3\n---\na\n",
        );
        write(
            dir.path(),
            "c.md",
            "---\ntype: reference\nname: C\npriority: 2\n---\nc\n",
        );
        write(dir.path(), "notes.txt", "not an item");
        let names: Vec<String> = read_items(dir.path())
            .unwrap()
            .into_iter()
            .map(|i| i.name().to_owned())
            .collect();
        assert_eq!(names, ["B", "C", "A"]);
        let twin = write(dir.path(), "d.md", "---\ntype: rule\nname: A\n---\nagain\n");
        let e = read_items(dir.path()).unwrap_err();
        assert_eq!(e.file, twin);
        assert_eq!(e.line, Some(3), "the line of its name: {e}");
        assert!(e.message.contains("a.md"), "{e}");
    }
}
