//! No import circles inside a crate (issue 31: `params` called into `ypir` while `ypir` built
//! on `params`, so 17 files of this crate used each other in a circle).
//!
//! The rule: at every level of a crate's module tree, the sibling modules, each taken with
//! everything under it, use each other without a cycle. A module's use of its own ancestors or
//! descendants is not counted: a child is part of its parent (it sees the parent's private
//! items; the parent declares and re-exports it). So `params` (with `params::ypir`, YPIR's
//! layouts) must not use `ypir` while `ypir` uses `params`: parameters sit below schemes.
//!
//! The check reads source text: `use` declarations (`{}` groups expanded, re-exports followed
//! to the module that defines the name), and paths in code that start with `crate::`,
//! `super::`, `self::`, a child module or a name the module imported. Comments, strings,
//! `#[cfg(test)]` modules and test files are left out: tests may use anything.
//!
//! It runs on this crate, and on every crate of the workspace, where the cycles not fixed yet
//! are listed in [`KNOWN`].

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Cycles in crates this change does not own, as `crate dir: module, module`; remove an entry
/// once its cycle is gone.
const KNOWN: &[&str] = &["crates/kernels: ntt::montgomery, ntt::packing"];

type ModPath = Vec<String>;

/// Source text without comments, string and character literals (a literal becomes `""`).
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &src[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |j| j + 2);
        } else if let Some(hashes) = raw_string_start(rest) {
            let close = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            i += body
                + rest[body..]
                    .find(&close)
                    .map_or(rest.len() - body, |j| j + close.len());
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            i = j + 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && char_literal_len(rest) > 0 {
            i += char_literal_len(rest);
            out.push_str("' '");
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// `r"`, `r#"`, ...: the number of `#`.
fn raw_string_start(rest: &str) -> Option<usize> {
    let after = rest.strip_prefix('r')?;
    let hashes = after.len() - after.trim_start_matches('#').len();
    after[hashes..].starts_with('"').then_some(hashes)
}

/// Length of a character literal at the start of `rest` (0: a lifetime, not a literal).
fn char_literal_len(rest: &str) -> usize {
    let mut chars = rest.char_indices().skip(1);
    match chars.next() {
        Some((_, '\\')) => rest[2..].find('\'').map_or(0, |j| j + 3),
        Some((_, c)) => match chars.next() {
            Some((j, '\'')) if j == 1 + c.len_utf8() => j + 1,
            _ => 0,
        },
        None => 0,
    }
}

/// `src` without `#[cfg(test)] mod NAME { .. }` blocks and `#[cfg(test)] use ..;`.
fn without_tests(mut src: String) -> String {
    let mut from = 0;
    while let Some(at) = src[from..].find("#[cfg(test)]").map(|j| j + from) {
        let after = at + "#[cfg(test)]".len();
        let rest = src[after..].trim_start();
        let start = src.len() - rest.len();
        let rest = rest.strip_prefix("pub(crate) ").unwrap_or(rest);
        let rest = rest.strip_prefix("pub ").unwrap_or(rest);
        let end = if rest.starts_with("use ") {
            rest.find(';').map(|j| src.len() - rest.len() + j + 1)
        } else if rest.starts_with("mod ") {
            let open = rest.find(['{', ';']).map(|j| src.len() - rest.len() + j);
            match open {
                Some(j) if src.as_bytes()[j] == b'{' => matching_brace(&src, j).map(|k| k + 1),
                _ => None,
            }
        } else {
            None
        };
        match end {
            Some(end) => src.replace_range(at..end, ""),
            None => from = start,
        }
    }
    src
}

fn matching_brace(src: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, c) in src[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + j);
                }
            }
            _ => {}
        }
    }
    None
}

/// Every non-test source file of `src_dir` by module path (`lib.rs`, `main.rs`: the root).
fn module_files(src_dir: &Path) -> BTreeMap<ModPath, PathBuf> {
    fn walk(dir: &Path, prefix: &ModPath, out: &mut BTreeMap<ModPath, PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "bin" && name != "tests" {
                    let mut inner = prefix.clone();
                    inner.push(name);
                    walk(&path, &inner, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && !(name == "tests" || name.ends_with("_tests") || name == "testutil")
            {
                let mut module = prefix.clone();
                if !matches!(name.as_str(), "lib" | "main" | "mod") {
                    module.push(name);
                }
                out.insert(module, path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src_dir, &Vec::new(), &mut out);
    out
}

/// The `(path, name)` pairs a use tree brings in (`a::{b, c::d as e}`: `a::b` as `b`, ...).
fn use_tree(prefix: &[String], tree: &str, out: &mut Vec<(ModPath, String)>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let mut path = prefix.to_vec();
        path.extend(segments(tree[..open].trim_end_matches(':')));
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let (mut depth, mut start) = (0, 0);
        for (j, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    use_tree(&path, &inner[start..j], out);
                    start = j + 1;
                }
                _ => {}
            }
        }
        use_tree(&path, &inner[start..], out);
        return;
    }
    let (path_text, alias) = match tree.split_once(" as ") {
        Some((p, a)) => (p, Some(a.trim().to_string())),
        None => (tree, None),
    };
    let mut path = prefix.to_vec();
    path.extend(segments(path_text));
    if path.last().is_some_and(|s| s == "self") {
        path.pop();
    }
    if path.is_empty() || path.last().is_some_and(|s| s == "*") {
        path.pop();
        if !path.is_empty() {
            out.push((path, String::new()));
        }
        return;
    }
    let name = alias.unwrap_or_else(|| path.last().unwrap().clone());
    out.push((path, name));
}

fn segments(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// One module's references: its use declarations and the paths in its code.
struct Source {
    uses: Vec<(ModPath, String)>,
    paths: Vec<ModPath>,
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn read_source(text: &str) -> Source {
    let b = text.as_bytes();
    let mut uses = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("use ").map(|j| j + from) {
        from = at + 4;
        if at > 0 && (is_ident_byte(b[at - 1]) || b[at - 1] == b':') {
            continue;
        }
        if let Some(end) = text[at..].find(';') {
            use_tree(&[], &text[at + 4..at + end], &mut uses);
        }
    }
    let mut paths = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if is_ident_byte(b[i]) && (i == 0 || !(is_ident_byte(b[i - 1]) || b[i - 1] == b':')) {
            let mut j = i;
            while j < b.len()
                && (is_ident_byte(b[j]) || (b[j] == b':' && b.get(j + 1) == Some(&b':')))
            {
                j += if b[j] == b':' { 2 } else { 1 };
            }
            let path: ModPath = segments(&text[i..j]).collect();
            if path.len() > 1 {
                paths.push(path);
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    Source { uses, paths }
}

/// A crate's modules and the sibling-level edges between them.
struct Graph {
    modules: BTreeSet<ModPath>,
    /// `(module, name)` to the absolute path it names, from use declarations.
    names: BTreeMap<(ModPath, String), ModPath>,
}

impl Graph {
    /// `path` as written in `module`, made absolute (None: another crate or a local item).
    fn absolute(&self, module: &ModPath, path: &[String]) -> Option<ModPath> {
        let first = path.first()?;
        let mut base = module.clone();
        let mut rest = path;
        match first.as_str() {
            "crate" => return Some(path[1..].to_vec()),
            "self" | "super" => {
                while let Some(s) = rest.first().filter(|s| *s == "self" || *s == "super") {
                    if s == "super" {
                        base.pop()?;
                    }
                    rest = &rest[1..];
                }
            }
            _ => {
                let mut child = module.clone();
                child.push(first.clone());
                if !self.modules.contains(&child) {
                    let named = self.names.get(&(module.clone(), first.clone()))?;
                    let mut out = named.clone();
                    out.extend_from_slice(&path[1..]);
                    return Some(out);
                }
            }
        }
        base.extend_from_slice(rest);
        Some(base)
    }

    /// The module that defines what absolute `path` names, following re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> ModPath {
        let mut module: ModPath = Vec::new();
        for (k, segment) in path.iter().enumerate() {
            let mut child = module.clone();
            child.push(segment.clone());
            if self.modules.contains(&child) {
                module = child;
                continue;
            }
            if let Some(target) = self.names.get(&(module.clone(), segment.clone())) {
                if depth < 16 && target != &child {
                    let mut next = target.clone();
                    next.extend_from_slice(&path[k + 1..]);
                    return self.resolve(&next, depth + 1);
                }
            }
            break;
        }
        module
    }
}

/// The cycles among sibling modules of the crate whose sources are in `src_dir`, each as its
/// modules' paths (`a::b`), sorted.
fn cycles(src_dir: &Path) -> Vec<Vec<String>> {
    let files = module_files(src_dir);
    let sources: BTreeMap<ModPath, Source> = files
        .iter()
        .map(|(module, path)| {
            let text = without_tests(strip(&std::fs::read_to_string(path).unwrap()));
            (module.clone(), read_source(&text))
        })
        .collect();
    let mut graph = Graph {
        modules: files.keys().cloned().collect(),
        names: BTreeMap::new(),
    };
    // Use declarations may name modules imported by others: absolute paths need the table,
    // and the table needs absolute paths, so fill it in a few rounds.
    for _ in 0..3 {
        for (module, source) in &sources {
            for (path, name) in &source.uses {
                if name.is_empty() {
                    continue;
                }
                if let Some(absolute) = graph.absolute(module, path) {
                    graph.names.insert((module.clone(), name.clone()), absolute);
                }
            }
        }
    }
    let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (module, source) in &sources {
        let written = source.uses.iter().map(|(p, _)| p).chain(&source.paths);
        for path in written {
            let Some(absolute) = graph.absolute(module, path) else {
                continue;
            };
            let target = graph.resolve(&absolute, 0);
            let common = module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if common == module.len() || common == target.len() {
                continue; // itself, an ancestor or a descendant
            }
            edges
                .entry(module[..=common].to_vec())
                .or_default()
                .insert(target[..=common].to_vec());
        }
    }
    strongly_connected(&edges)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let mut names: Vec<String> = component.iter().map(|m| m.join("::")).collect();
            names.sort();
            names
        })
        .collect()
}

/// Tarjan's strongly connected components.
fn strongly_connected(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct State<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, (usize, usize)>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a ModPath) {
        let n = s.index.len();
        s.index.insert(v, (n, n));
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.index[w].1.min(s.index[v].1);
                s.index.get_mut(v).unwrap().1 = low;
            } else if s.on_stack.contains(w) {
                let low = s.index[w].0.min(s.index[v].1);
                s.index.get_mut(v).unwrap().1 = low;
            }
        }
        if s.index[v].0 == s.index[v].1 {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            s.found.push(component);
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    state.found
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn this_crate_has_no_import_cycle() {
    let found = cycles(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(found.is_empty(), "import cycles in pir-lattice: {found:?}");
}

#[test]
fn no_crate_of_the_workspace_has_a_new_import_cycle() {
    let mut found = Vec::new();
    for group in ["crates", "apps"] {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(workspace().join(group))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("src").is_dir())
            .collect();
        dirs.sort();
        for dir in dirs {
            let name = format!("{group}/{}", dir.file_name().unwrap().to_string_lossy());
            for cycle in cycles(&dir.join("src")) {
                found.push(format!("{name}: {}", cycle.join(", ")));
            }
        }
    }
    let new: Vec<&String> = found
        .iter()
        .filter(|c| !KNOWN.contains(&c.as_str()))
        .collect();
    assert!(new.is_empty(), "import cycles: {new:#?}");
    for known in KNOWN {
        if !found.iter().any(|c| c == known) {
            println!("note: {known} is fixed; remove it from KNOWN");
        }
    }
}

#[test]
fn the_check_finds_a_cycle_through_re_exports_and_ignores_parents() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |name: &str, text: &str| {
        let path = src.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "pub mod a;\npub mod b;\npub mod c;\npub use b::Thing;\n",
    );
    // `a` reaches `b` through the root's re-export; `b`'s child reaches `a` by a path in code.
    write(
        "a.rs",
        "use crate::{Thing as T};\n// crate::c::x in a comment\n",
    );
    write(
        "b.rs",
        "mod inner;\npub struct Thing;\nfn f() { super::c::g(); }\n",
    );
    write(
        "b/inner.rs",
        "fn g() { let s = \"crate::c\"; crate::a::h(); super::Thing; }\n",
    );
    write(
        "c.rs",
        "#[cfg(test)]\nmod tests { use crate::a::h; }\npub fn g() {}\n",
    );
    assert_eq!(
        cycles(src),
        vec![vec!["a".to_string(), "b".to_string()]],
        "a -> b (a re-export), b::inner -> a (a path in code); b -> c, and c -> a only in tests"
    );
}
