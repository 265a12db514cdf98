//! The commits between two revisions of a git source, oldest first, read
//! from the source's bare mirror (fetched first): what `bisect --source`
//! searches.

use std::path::Path;

use super::SourceError;

/// One commit of a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeCommit {
    /// The full commit id.
    pub id: String,
    /// The first line of its message.
    pub subject: String,
}

/// How the two ends of a range relate in the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    /// `from`, then every commit after it up to and including `to`, oldest
    /// first.
    pub commits: Vec<RangeCommit>,
}

/// The commits from `from` to `to` of the source `name` at `url`, oldest
/// first, both ends included: `from` must be an ancestor of `to`. With
/// `first_parent`, only the first-parent chain from `to` (the merges of a
/// mainline, not the commits of the branches they merged).
pub fn commits(
    cache: &Path,
    name: &str,
    url: &str,
    from: &str,
    to: &str,
    first_parent: bool,
) -> Result<Range, SourceError> {
    let mirror = super::mirror::update(&cache.join("git"), url).map_err(|e| SourceError::Git {
        name: name.to_string(),
        message: format!("fetching {url}: {}", e.message()),
    })?;
    walk(&mirror, name, url, from, to, first_parent)
}

/// As [`commits`], from the mirror as the last fetch left it, without
/// fetching (a report counting the commits a source moved by must not wait
/// on the network); an error when it was never fetched here.
pub fn commits_fetched(
    cache: &Path,
    name: &str,
    url: &str,
    from: &str,
    to: &str,
    first_parent: bool,
) -> Result<Range, SourceError> {
    let mirror = super::mirror::path(&cache.join("git"), url);
    if !mirror.is_dir() {
        return Err(SourceError::Git {
            name: name.to_string(),
            message: format!("{url} was never fetched to this machine"),
        });
    }
    walk(&mirror, name, url, from, to, first_parent)
}

/// The range in the bare mirror at `mirror`.
fn walk(
    mirror: &Path,
    name: &str,
    url: &str,
    from: &str,
    to: &str,
    first_parent: bool,
) -> Result<Range, SourceError> {
    let git = |message: String| SourceError::Git {
        name: name.to_string(),
        message,
    };
    let repo = git2::Repository::open_bare(mirror).map_err(|e| git(e.message().to_string()))?;
    let resolve = |rev: &str| {
        repo.revparse_single(rev)
            .or_else(|_| repo.revparse_single(&format!("origin/{rev}")))
            .and_then(|o| o.peel_to_commit())
            .map_err(|e| git(format!("ref `{rev}` not found in {url}: {}", e.message())))
    };
    let from_commit = resolve(from)?;
    let to_commit = resolve(to)?;
    if from_commit.id() == to_commit.id() {
        return Err(git(format!("`{from}` and `{to}` are the same commit")));
    }
    let is_ancestor = repo
        .graph_descendant_of(to_commit.id(), from_commit.id())
        .map_err(|e| git(e.message().to_string()))?;
    if !is_ancestor {
        return Err(git(format!(
            "`{from}` ({}) is not an ancestor of `{to}` ({}): a range runs from the older \
             commit to the newer",
            short(&from_commit.id().to_string()),
            short(&to_commit.id().to_string())
        )));
    }
    let mut walk = repo.revwalk().map_err(|e| git(e.message().to_string()))?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)
        .map_err(|e| git(e.message().to_string()))?;
    if first_parent {
        walk.simplify_first_parent()
            .map_err(|e| git(e.message().to_string()))?;
    }
    walk.push(to_commit.id())
        .map_err(|e| git(e.message().to_string()))?;
    walk.hide(from_commit.id())
        .map_err(|e| git(e.message().to_string()))?;
    let mut out = vec![entry(&from_commit)];
    for oid in walk {
        let oid = oid.map_err(|e| git(e.message().to_string()))?;
        let c = repo
            .find_commit(oid)
            .map_err(|e| git(e.message().to_string()))?;
        // On the first-parent chain, each commit's first parent is the one
        // before it; else `from` lies on a merged branch, off the chain.
        if first_parent
            && c.parent_id(0).ok().map(|p| p.to_string()) != out.last().map(|l| l.id.clone())
        {
            return Err(git(format!(
                "`{from}` is not on the first-parent chain of `{to}` (it was merged from a \
                 branch); give --all-commits"
            )));
        }
        out.push(entry(&c));
    }
    Ok(Range { commits: out })
}

fn entry(c: &git2::Commit) -> RangeCommit {
    RangeCommit {
        id: c.id().to_string(),
        subject: String::from_utf8_lossy(c.message_bytes())
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string(),
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commits `parents` into `repo` on HEAD's branch (`update` moves it).
    fn commit(
        repo: &git2::Repository,
        msg: &str,
        parents: &[git2::Oid],
        update: bool,
    ) -> git2::Oid {
        let sig = git2::Signature::now("t", "t@example.org").unwrap();
        let mut index = repo.index().unwrap();
        let blob = repo.blob(msg.as_bytes()).unwrap();
        index
            .add(&git2::IndexEntry {
                ctime: git2::IndexTime::new(0, 0),
                mtime: git2::IndexTime::new(0, 0),
                dev: 0,
                ino: 0,
                mode: 0o100644,
                uid: 0,
                gid: 0,
                file_size: msg.len() as u32,
                id: blob,
                flags: 0,
                flags_extended: 0,
                path: b"f".to_vec(),
            })
            .unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let parents: Vec<git2::Commit> = parents
            .iter()
            .map(|p| repo.find_commit(*p).unwrap())
            .collect();
        let refs: Vec<&git2::Commit> = parents.iter().collect();
        repo.commit(update.then_some("HEAD"), &sig, &sig, msg, &tree, &refs)
            .unwrap()
    }

    #[test]
    fn first_parent_keeps_the_mainline_and_all_commits_the_merged_branch_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("up");
        let repo = git2::Repository::init(&path).unwrap();
        let a = commit(&repo, "a", &[], true);
        let b = commit(&repo, "b", &[a], true);
        let c1 = commit(&repo, "c1", &[b], false);
        let c2 = commit(&repo, "c2", &[c1], false);
        let d = commit(&repo, "d", &[b], true);
        let m = commit(&repo, "merge side", &[d, c2], true);
        repo.tag_lightweight("start", &repo.find_object(a, None).unwrap(), false)
            .unwrap();
        let cache = dir.path().join("cache");
        let url = path.display().to_string();
        let subjects = |first_parent: bool| -> Vec<String> {
            commits(&cache, "s", &url, "start", &m.to_string(), first_parent)
                .unwrap()
                .commits
                .into_iter()
                .map(|c| c.subject)
                .collect()
        };
        assert_eq!(subjects(true), ["a", "b", "d", "merge side"]);
        let all = subjects(false);
        assert_eq!(all.len(), 6, "{all:?}");
        assert_eq!((all[0].as_str(), all[5].as_str()), ("a", "merge side"));
        let e = commits(&cache, "s", &url, &m.to_string(), "start", true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not an ancestor of"), "{e}");
        let e = commits(&cache, "s", &url, "start", "nope", true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ref `nope` not found"), "{e}");
        // A start on the merged branch is off the first-parent chain.
        let e = commits(&cache, "s", &url, &c1.to_string(), &m.to_string(), true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not on the first-parent chain"), "{e}");
        let from_side = commits(&cache, "s", &url, &c1.to_string(), &m.to_string(), false).unwrap();
        // As `git rev-list c1..m`: d is not reachable from c1 either.
        assert_eq!(from_side.commits.len(), 4, "c1, then c2, d, merge");
    }
}
