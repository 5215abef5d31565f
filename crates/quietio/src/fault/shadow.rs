//! The shadow model: what a power cut would leave of each file and of the
//! directory. Per file, the durable bytes (its content at the last
//! successful `fdatasync`) and the changes since, in the order they
//! reached the file; per directory, the names that are durable (as of the
//! last directory `fsync`) and the name changes since. This is the weak
//! POSIX model: a create, rename or remove is durable only once the
//! directory is synced, whatever ext4's journal would also give.

use std::collections::{BTreeMap, HashMap};

/// A file (an inode): names come and go, the file keeps its id.
pub type FileId = u64;

/// A change to a file's bytes not yet made durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    Write {
        offset: u64,
        data: Vec<u8>,
    },
    /// `ftruncate`.
    SetLen(u64),
    /// `fallocate` (mode 0): the size grows to at least this.
    Extend(u64),
}

impl Change {
    pub(crate) fn apply(&self, content: &mut Vec<u8>) {
        match self {
            Change::Write { offset, data } => {
                let start = *offset as usize;
                let end = start + data.len();
                if content.len() < end {
                    content.resize(end, 0);
                }
                content[start..end].copy_from_slice(data);
            }
            Change::SetLen(len) => content.resize(*len as usize, 0),
            Change::Extend(len) => {
                if content.len() < *len as usize {
                    content.resize(*len as usize, 0);
                }
            }
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct FileState {
    pub durable: Vec<u8>,
    pub pending: Vec<Change>,
}

/// A change to the directory not yet made durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NameChange {
    Bind(String, FileId),
    Unbind(String),
    /// Atomic: a cut never leaves the file under neither name.
    Rename {
        from: String,
        to: String,
    },
}

impl NameChange {
    pub(crate) fn apply(&self, names: &mut BTreeMap<String, FileId>) {
        match self {
            NameChange::Bind(n, id) => {
                names.insert(n.clone(), *id);
            }
            NameChange::Unbind(n) => {
                names.remove(n);
            }
            NameChange::Rename { from, to } => {
                if let Some(id) = names.remove(from) {
                    names.insert(to.clone(), id);
                }
            }
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Shadow {
    files: HashMap<FileId, FileState>,
    /// Names as the running system sees them.
    live: BTreeMap<String, FileId>,
    /// Names a power cut keeps for sure.
    durable: BTreeMap<String, FileId>,
    /// Name changes since the last directory sync, oldest first.
    name_changes: Vec<NameChange>,
    next_id: FileId,
}

impl Shadow {
    /// A file that was there, durable, before the layer was installed.
    pub(crate) fn seed(&mut self, name: &str, content: Vec<u8>) {
        let id = self.new_file(content);
        self.live.insert(name.to_string(), id);
        self.durable.insert(name.to_string(), id);
    }

    fn new_file(&mut self, durable: Vec<u8>) -> FileId {
        let id = self.next_id;
        self.next_id += 1;
        self.files.insert(
            id,
            FileState {
                durable,
                pending: Vec::new(),
            },
        );
        id
    }

    /// A file opened for writing under `name`: the existing one (cut to
    /// zero with `truncate`), or a new one whose name is not yet durable.
    pub(crate) fn create(&mut self, name: &str, truncate: bool) -> FileId {
        if let Some(&id) = self.live.get(name) {
            if truncate {
                self.change(id, Change::SetLen(0));
            }
            return id;
        }
        let id = self.new_file(Vec::new());
        self.live.insert(name.to_string(), id);
        self.name_changes
            .push(NameChange::Bind(name.to_string(), id));
        id
    }

    pub(crate) fn change(&mut self, id: FileId, c: Change) {
        if let Some(f) = self.files.get_mut(&id) {
            f.pending.push(c);
        }
    }

    /// A successful `fdatasync`: everything written is durable.
    pub(crate) fn sync(&mut self, id: FileId) {
        if let Some(f) = self.files.get_mut(&id) {
            for c in std::mem::take(&mut f.pending) {
                c.apply(&mut f.durable);
            }
        }
    }

    /// A failed `fdatasync`: Linux may have dropped the dirty pages (and
    /// marked them clean), so the unsynced changes are taken as lost for
    /// good: no later sync makes them durable.
    pub(crate) fn sync_failed(&mut self, id: FileId) {
        if let Some(f) = self.files.get_mut(&id) {
            f.pending.clear();
        }
    }

    pub(crate) fn rename(&mut self, from: &str, to: &str) {
        if let Some(id) = self.live.remove(from) {
            self.live.insert(to.to_string(), id);
            self.name_changes.push(NameChange::Rename {
                from: from.to_string(),
                to: to.to_string(),
            });
        }
    }

    pub(crate) fn remove(&mut self, name: &str) {
        if self.live.remove(name).is_some() {
            self.name_changes.push(NameChange::Unbind(name.to_string()));
        }
    }

    pub(crate) fn dir_synced(&mut self) {
        self.durable = self.live.clone();
        self.name_changes.clear();
    }

    pub(crate) fn lookup(&self, name: &str) -> Option<FileId> {
        self.live.get(name).copied()
    }

    pub(crate) fn file(&self, id: FileId) -> Option<&FileState> {
        self.files.get(&id)
    }

    pub(crate) fn durable_names(&self) -> &BTreeMap<String, FileId> {
        &self.durable
    }

    pub(crate) fn name_changes(&self) -> &[NameChange] {
        &self.name_changes
    }

    /// What a reader sees now (durable bytes plus every change).
    pub(crate) fn visible(&self, id: FileId) -> Option<Vec<u8>> {
        let f = self.files.get(&id)?;
        let mut c = f.durable.clone();
        for ch in &f.pending {
            ch.apply(&mut c);
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_durable_only_after_a_sync_and_names_only_after_a_dir_sync() {
        let mut s = Shadow::default();
        let id = s.create("a", true);
        s.change(
            id,
            Change::Write {
                offset: 0,
                data: b"hello".to_vec(),
            },
        );
        assert_eq!(s.visible(id).unwrap(), b"hello");
        assert!(s.file(id).unwrap().durable.is_empty());
        assert!(s.durable_names().is_empty());
        s.sync(id);
        assert_eq!(s.file(id).unwrap().durable, b"hello");
        assert!(
            s.durable_names().is_empty(),
            "fdatasync does not make the name durable"
        );
        s.dir_synced();
        assert_eq!(s.durable_names().get("a"), Some(&id));
    }

    #[test]
    fn a_failed_sync_loses_the_unsynced_changes_for_good() {
        let mut s = Shadow::default();
        s.seed("w", b"abc".to_vec());
        let id = s.lookup("w").unwrap();
        s.change(
            id,
            Change::Write {
                offset: 3,
                data: b"def".to_vec(),
            },
        );
        s.sync_failed(id);
        s.change(
            id,
            Change::Write {
                offset: 6,
                data: b"g".to_vec(),
            },
        );
        s.sync(id);
        assert_eq!(s.file(id).unwrap().durable, b"abc\0\0\0g");
    }

    #[test]
    fn renames_and_removes_keep_the_file_and_wait_for_the_dir_sync() {
        let mut s = Shadow::default();
        s.seed("CURRENT", b"old".to_vec());
        let old = s.lookup("CURRENT").unwrap();
        let tmp = s.create("CURRENT.tmp", true);
        s.change(
            tmp,
            Change::Write {
                offset: 0,
                data: b"new".to_vec(),
            },
        );
        s.sync(tmp);
        s.rename("CURRENT.tmp", "CURRENT");
        assert_eq!(s.lookup("CURRENT"), Some(tmp));
        assert_eq!(s.durable_names().get("CURRENT"), Some(&old));
        assert_eq!(s.name_changes().len(), 2, "bind, then rename");
        s.dir_synced();
        assert_eq!(s.durable_names().get("CURRENT"), Some(&tmp));
        assert!(!s.durable_names().contains_key("CURRENT.tmp"));
        s.remove("CURRENT");
        assert_eq!(s.durable_names().get("CURRENT"), Some(&tmp));
        assert_eq!(s.lookup("CURRENT"), None);
    }

    #[test]
    fn truncate_on_create_and_set_len_and_extend_are_changes() {
        let mut s = Shadow::default();
        s.seed("f", b"0123456789".to_vec());
        let id = s.create("f", true);
        assert_eq!(s.visible(id).unwrap(), b"");
        s.change(id, Change::Extend(4));
        s.change(
            id,
            Change::Write {
                offset: 1,
                data: b"x".to_vec(),
            },
        );
        s.change(id, Change::SetLen(3));
        assert_eq!(s.visible(id).unwrap(), b"\0x\0");
        assert_eq!(s.file(id).unwrap().durable, b"0123456789");
        assert_eq!(s.create("f", false), id, "reopening keeps the file");
    }
}
