//! `cargo xtask layers`: no crate of the workspace has a cycle among its modules, at any depth
//! (file by file, and grouped by each level of folders). A module refers to another by a
//! `crate::…` or `super::…` path (in a `use` or inline); code after a `#[cfg(test)]` in a file is
//! left out, as a test module may use its parent. A cycle fails naming the references that close
//! it, with file and line. Also run by the workspace's tests (`the_workspace_has_no_module_cycle`),
//! so `cargo xtask test` and CI keep it true (docs/architecture.md).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::tools::root;

/// A module: its path inside the crate (`["context", "plan"]`; the crate root is empty).
type Module = Vec<String>;

/// One reference from a module to another, and where it is written.
#[derive(Debug, Clone)]
struct Reference {
    to: Module,
    at: String,
}

/// Checks every crate of the workspace; prints what it found.
pub fn check() -> Result<()> {
    let report = workspace_report(&root())?;
    if report.is_empty() {
        println!("no module cycle in any crate of the workspace");
        return Ok(());
    }
    eprint!("{report}");
    bail!("module cycles: each part should be readable and testable alone (docs/architecture.md)")
}

/// The cycles of every workspace member under `root`, in words (empty: none).
fn workspace_report(root: &Path) -> Result<String> {
    let mut out = String::new();
    for member in workspace_members(root)? {
        let src = root.join(&member).join("src");
        if src.is_dir() {
            out += &crate_report(&member, &src)?;
        }
    }
    Ok(out)
}

/// The `members` of the workspace's Cargo.toml.
fn workspace_members(root: &Path) -> Result<Vec<String>> {
    let manifest =
        std::fs::read_to_string(root.join("Cargo.toml")).context("reading Cargo.toml")?;
    let list = manifest
        .split_once("members")
        .and_then(|(_, rest)| rest.split_once('['))
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .context("no `members = [...]` in Cargo.toml")?;
    Ok(list
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_owned())
        .filter(|m| !m.is_empty())
        .collect())
}

/// The cycles of one crate (`src`: its source folder), at every depth, in words.
fn crate_report(name: &str, src: &Path) -> Result<String> {
    let files = rust_files(src)?;
    let modules: BTreeSet<Module> = files.keys().cloned().collect();
    let mut edges: BTreeMap<Module, Vec<Reference>> = BTreeMap::new();
    for (module, file) in &files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let shown = file
            .strip_prefix(root())
            .unwrap_or(file)
            .display()
            .to_string();
        for (path, line) in references(module, &text) {
            let Some(to) = resolve(&modules, &path) else {
                continue;
            };
            if &to != module && !to.is_empty() && !module.is_empty() {
                edges.entry(module.clone()).or_default().push(Reference {
                    to,
                    at: format!("{shown}:{line}"),
                });
            }
        }
    }
    let depth = modules.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = String::new();
    let mut seen = BTreeSet::new();
    // Deepest first: a cycle between files is reported as such, not again for its folders.
    for level in (1..=depth).rev() {
        let grouped = group(&edges, level);
        for cycle in cycles(&grouped) {
            let members: BTreeSet<Module> = cycle.iter().map(|(m, _)| m.clone()).collect();
            if !seen.insert(members.clone()) {
                continue;
            }
            let names: Vec<String> = members.iter().map(|m| m.join("::")).collect();
            out += &format!("{name}: cycle among {}\n", names.join(", "));
            for (from, r) in &cycle {
                out += &format!(
                    "  {} -> {}   ({})\n",
                    from.join("::"),
                    r.to.join("::"),
                    r.at
                );
            }
        }
    }
    Ok(out)
}

/// Every `.rs` file under `src` by the module it is.
fn rust_files(src: &Path) -> Result<BTreeMap<Module, PathBuf>> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.insert(module_of(src, &path), path);
            }
        }
    }
    Ok(out)
}

/// The module a file is: its path under `src` without `.rs`, `mod.rs`, `lib.rs` or `main.rs`.
fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|l| ["mod", "lib", "main"].contains(&l.as_str()))
    {
        parts.pop();
    }
    parts
}

/// The longest known module that `path` starts with.
fn resolve(modules: &BTreeSet<Module>, path: &[String]) -> Option<Module> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|m| modules.contains(m))
}

/// Each module path `text` (the source of `module`) refers to, with its line: `use crate::…` and
/// `use super::…` trees expanded, and inline `crate::…` / `super::…` paths.
fn references(module: &Module, text: &str) -> Vec<(Vec<String>, usize)> {
    let code = without_comments_and_strings(text);
    let code = match code.find("#[cfg(test)]") {
        Some(cut) => &code[..cut],
        None => &code[..],
    };
    let parent: Vec<String> = module[..module.len().saturating_sub(1)].to_vec();
    let base = |head: &str| -> Option<Vec<String>> {
        match head {
            "crate" => Some(Vec::new()),
            "super" => Some(parent.clone()),
            _ => None,
        }
    };
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut uses = Vec::new();
    for (at, _) in code.match_indices("use ") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at + 4..];
        let Some(end) = rest.find(';') else { continue };
        let tree: String = rest[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        let Some((head, body)) = tree.split_once("::") else {
            continue;
        };
        let Some(prefix) = base(head.trim()) else {
            continue;
        };
        uses.push(at..at + 4 + end);
        for path in expand(&prefix, body) {
            out.push((path, line_of(at)));
        }
    }
    for head in ["crate::", "super::"] {
        for (at, _) in code.match_indices(head) {
            if uses.iter().any(|u| u.contains(&at)) {
                continue;
            }
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let Some(mut path) = base(&head[..head.len() - 2]) else {
                continue;
            };
            let tail: String = code[at + head.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            path.extend(
                tail.split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned),
            );
            out.push((path, line_of(at)));
        }
    }
    out
}

/// Expands a use tree body such as `a::{b, c::d}` into paths under `prefix`.
fn expand(prefix: &[String], body: &str) -> Vec<Vec<String>> {
    let mut parts = Vec::new();
    let (mut depth, mut current) = (0, String::new());
    for c in body.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            parts.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    parts.push(current);
    let mut out = Vec::new();
    for part in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        if let (Some(open), true) = (part.find('{'), part.ends_with('}')) {
            let mut head = prefix.to_vec();
            head.extend(
                part[..open]
                    .split("::")
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned),
            );
            out.extend(expand(&head, &part[open + 1..part.len() - 1]));
        } else {
            let name = part.split(" as ").next().unwrap_or(part);
            let mut path = prefix.to_vec();
            path.extend(
                name.split("::")
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned),
            );
            out.push(path);
        }
    }
    out
}

/// `text` with comments, string and character literals blanked out (lines kept), so a path in a
/// doc comment or a string is not a reference.
fn without_comments_and_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&chars, i) {
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            i += 2 + hashes;
            while i < chars.len() {
                if chars[i] == '"'
                    && chars[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    i += 1 + hashes;
                    break;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if let Some(&c) = chars.get(i) {
                    out.push(blank(c));
                }
                i += 1;
            }
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal ('a', '\n', '\u{..}'), not a lifetime.
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// The edges between modules cut to their first `level` parts (a reference inside one group is
/// dropped).
fn group(
    edges: &BTreeMap<Module, Vec<Reference>>,
    level: usize,
) -> BTreeMap<Module, Vec<Reference>> {
    let cut = |m: &Module| m[..m.len().min(level)].to_vec();
    let mut out: BTreeMap<Module, Vec<Reference>> = BTreeMap::new();
    for (from, refs) in edges {
        for r in refs {
            let (a, b) = (cut(from), cut(&r.to));
            if a != b {
                out.entry(a).or_default().push(Reference {
                    to: b,
                    at: r.at.clone(),
                });
            }
        }
    }
    out
}

/// One shortest cycle through each strongly connected group of two or more modules, as the
/// references that make it (the last one closes it).
fn cycles(edges: &BTreeMap<Module, Vec<Reference>>) -> Vec<Vec<(Module, Reference)>> {
    let mut out = Vec::new();
    let mut covered: BTreeSet<Module> = BTreeSet::new();
    for start in edges.keys() {
        if covered.contains(start) {
            continue;
        }
        if let Some(cycle) = shortest_cycle(edges, start) {
            covered.extend(strongly_connected(edges, start));
            out.push(cycle);
        }
    }
    out
}

/// The shortest path from `start` back to itself (breadth first), if any.
fn shortest_cycle(
    edges: &BTreeMap<Module, Vec<Reference>>,
    start: &Module,
) -> Option<Vec<(Module, Reference)>> {
    let mut came_from: BTreeMap<Module, (Module, Reference)> = BTreeMap::new();
    let mut queue = VecDeque::from([start.clone()]);
    while let Some(at) = queue.pop_front() {
        for r in edges.get(&at).into_iter().flatten() {
            if &r.to == start {
                let mut path = vec![(at.clone(), r.clone())];
                let mut node = at.clone();
                while &node != start {
                    let (prev, edge) = came_from[&node].clone();
                    path.push((prev.clone(), edge));
                    node = prev;
                }
                path.reverse();
                return Some(path);
            }
            if !came_from.contains_key(&r.to) {
                came_from.insert(r.to.clone(), (at.clone(), r.clone()));
                queue.push_back(r.to.clone());
            }
        }
    }
    None
}

/// Every module that both reaches `start` and is reached from it.
fn strongly_connected(
    edges: &BTreeMap<Module, Vec<Reference>>,
    start: &Module,
) -> BTreeSet<Module> {
    let reach = |forward: bool| {
        let mut seen = BTreeSet::from([start.clone()]);
        let mut stack = vec![start.clone()];
        while let Some(at) = stack.pop() {
            let next: Vec<Module> = if forward {
                edges
                    .get(&at)
                    .into_iter()
                    .flatten()
                    .map(|r| r.to.clone())
                    .collect()
            } else {
                edges
                    .iter()
                    .filter(|(_, refs)| refs.iter().any(|r| r.to == at))
                    .map(|(m, _)| m.clone())
                    .collect()
            };
            for m in next {
                if seen.insert(m.clone()) {
                    stack.push(m);
                }
            }
        }
        seen
    };
    reach(true).intersection(&reach(false)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, file: &str, text: &str) {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("glassbox-layers-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_workspace_has_no_module_cycle() {
        let report = workspace_report(&root()).unwrap();
        assert!(report.is_empty(), "module cycles:\n{report}");
    }

    #[test]
    fn a_cycle_is_named_with_the_references_that_close_it() {
        let dir = scratch("cycle");
        write(&dir, "src/lib.rs", "mod a;\nmod b;\nmod c;\n");
        write(&dir, "src/a.rs", "use crate::b::Thing;\n");
        write(
            &dir,
            "src/b.rs",
            "// crate::a::Nothing in a comment\nconst S: &str = \"crate::a::X\";\nuse super::c::{self, Other};\n",
        );
        write(
            &dir,
            "src/c.rs",
            "fn f() { crate::a::run(); }\n#[cfg(test)]\nmod tests { use crate::b::T; }\n",
        );
        let report = crate_report("demo", &dir.join("src")).unwrap();
        assert!(report.contains("demo: cycle among a, b, c"), "{report}");
        assert!(report.contains("a -> b"), "{report}");
        assert!(
            report.contains("b -> c") && report.contains("b.rs:3"),
            "{report}"
        );
        assert!(
            report.contains("c -> a") && report.contains("c.rs:1"),
            "{report}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_cycle_between_folders_is_found_though_the_files_have_none() {
        let dir = scratch("folders");
        write(&dir, "src/lib.rs", "mod x;\nmod y;\n");
        write(&dir, "src/x/mod.rs", "mod one;\nmod two;\n");
        write(&dir, "src/x/one.rs", "use crate::y::left::L;\n");
        write(&dir, "src/y/mod.rs", "mod left;\nmod right;\n");
        write(&dir, "src/y/right.rs", "use crate::x::two::T;\n");
        write(&dir, "src/x/two.rs", "");
        write(&dir, "src/y/left.rs", "");
        let report = crate_report("demo", &dir.join("src")).unwrap();
        assert!(report.contains("demo: cycle among x, y"), "{report}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn layered_modules_pass() {
        let dir = scratch("layered");
        write(&dir, "src/lib.rs", "mod a;\nmod b;\n");
        write(
            &dir,
            "src/a.rs",
            "use crate::b::{One, two::{Three}};\nuse super::b as B;\n",
        );
        write(
            &dir,
            "src/b.rs",
            "pub struct One; const C: char = '\"'; fn f<'a>(x: &'a str) {}\n",
        );
        assert_eq!(crate_report("demo", &dir.join("src")).unwrap(), "");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
