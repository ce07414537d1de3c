//! The repository is self-contained: no tracked file points at a path outside it (a sibling
//! checkout such as `../shared/…`, an absolute path of one machine), and no text cites a
//! tracker's issue by number, which a reader of a clone cannot look up. Say what is meant
//! instead: the file in the repository, the contract, the commit.
//!
//! The files are `git ls-files` where the crate is a clone, else every file under the crate
//! root but build outputs and tools (`target/`, `.tools/`, `.git/`, `.gpu/`, `.venv/`).

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Directories that are never the project's own files.
const SKIP_DIRS: &[&str] = &[
    "target",
    ".tools",
    ".git",
    ".gpu",
    ".venv",
    "__pycache__",
    "node_modules",
];

/// Text that names a place outside the repository.
const OUTSIDE: &[&str] = &["../shared", "shared/design/", "shared/tools/", "/work/"];

/// The files of the repository, relative to its root.
fn files() -> Vec<PathBuf> {
    let root = Path::new(ROOT);
    if root.join(".git").exists() {
        if let Ok(out) = Command::new("git")
            .args(["ls-files", "-z"])
            .current_dir(root)
            .output()
        {
            if out.status.success() {
                return out
                    .stdout
                    .split(|&b| b == 0)
                    .filter(|s| !s.is_empty())
                    .map(|s| PathBuf::from(String::from_utf8_lossy(s).into_owned()))
                    .filter(|p| root.join(p).is_file())
                    .collect();
            }
        }
    }
    let mut found = Vec::new();
    walk(root, Path::new(""), &mut found);
    found
}

fn walk(root: &Path, rel: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(root.join(rel)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let path = rel.join(&name);
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if !SKIP_DIRS.contains(&name.to_string_lossy().as_ref()) {
                walk(root, &path, found);
            }
        } else if kind.is_file() {
            found.push(path);
        }
    }
}

/// Whether `line` cites an issue by number: "issue 4", "issue #4", "Issue 4's", "issues 3 and 4".
fn cites_issue_number(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut from = 0;
    while let Some(at) = lower[from..].find("issue") {
        let start = from + at;
        from = start + "issue".len();
        if start > 0 && bytes[start - 1].is_ascii_alphanumeric() {
            continue;
        }
        let mut i = from;
        if bytes.get(i) == Some(&b's') {
            i += 1;
        }
        if bytes.get(i) != Some(&b' ') {
            continue;
        }
        i += 1;
        if bytes.get(i) == Some(&b'#') {
            i += 1;
        }
        let digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            continue;
        }
        // A number, then the end of it: "issue 4", "issue 4's", "(issue 4)", "issue 4." —
        // not the verb before a quantity ("issues 2-D copies", "we issue 1.7× the loads").
        let after = &bytes[i + digits..];
        let ends = match after.first() {
            None => true,
            Some(b'.') => !after.get(1).is_some_and(u8::is_ascii_digit),
            Some(c) => b" ',;:)]".contains(c),
        };
        if ends {
            return true;
        }
    }
    false
}

/// The deepest a run of `../` in `line` climbs.
fn max_climb(line: &str) -> usize {
    let mut best = 0;
    let mut rest = line;
    while let Some(at) = rest.find("../") {
        let mut n = 0;
        let mut tail = &rest[at..];
        while let Some(t) = tail.strip_prefix("../") {
            n += 1;
            tail = t;
        }
        best = best.max(n);
        rest = tail;
    }
    best
}

/// `file:line: what` for every line of `text` (the file `rel`) that leaves the repository.
fn problems(rel: &Path, text: &str) -> Vec<String> {
    // A file `a/b/c.rs` may climb two levels (to the root) with `../`, never more.
    let depth = rel.components().count() - 1;
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = format!("{}:{}", rel.display(), i + 1);
        for pattern in OUTSIDE {
            if line.contains(pattern) {
                found.push(format!("{at}: names `{pattern}`, outside the repository"));
            }
        }
        let climb = max_climb(line);
        if climb > depth {
            found.push(format!(
                "{at}: `{}` climbs {climb} levels from a file {depth} below the root",
                "../".repeat(climb)
            ));
        }
        if cites_issue_number(line) {
            found.push(format!(
                "{at}: cites an issue by number (say what it means instead)"
            ));
        }
    }
    found
}

#[test]
fn no_file_refers_outside_the_repository() {
    let me = Path::new(file!());
    let files = files();
    assert!(
        files.iter().any(|f| f == Path::new("Cargo.toml")),
        "found no Cargo.toml among the repository's files ({} files)",
        files.len()
    );
    let mut found = Vec::new();
    for rel in files {
        if rel == me {
            continue; // the patterns themselves
        }
        let Ok(bytes) = std::fs::read(Path::new(ROOT).join(&rel)) else {
            continue;
        };
        if bytes.contains(&0) {
            continue; // binary
        }
        found.extend(problems(&rel, &String::from_utf8_lossy(&bytes)));
    }
    assert!(
        found.is_empty(),
        "{} line(s) refer outside the repository:\n  {}",
        found.len(),
        found.join("\n  ")
    );
}

#[test]
fn the_checks_catch_what_they_should() {
    let rel = Path::new("docs/x.md");
    assert_eq!(problems(rel, "see ../shared/design/A.md").len(), 2);
    assert_eq!(problems(rel, "run /work/main/x").len(), 1);
    assert_eq!(problems(rel, "[a](../README.md)").len(), 0);
    assert_eq!(problems(rel, "[a](../../README.md)").len(), 1);
    assert_eq!(problems(Path::new("README.md"), "../x").len(), 1);
    for cited in [
        "issue 4's table",
        "(Issue 9)",
        "issue #12",
        "issues 3 and 4",
        "as in issue 4.",
    ] {
        assert!(cites_issue_number(cited), "{cited}");
    }
    for fine in [
        "an issue",
        "tissue 4",
        "issues: 4",
        "the issue tracker",
        "one thread issues 2-D copies",
        "we issue 1.7× the loads",
    ] {
        assert!(!cites_issue_number(fine), "{fine}");
    }
}
