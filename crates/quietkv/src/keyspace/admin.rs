//! Creating, opening, listing and dropping keyspaces: each creation and
//! drop is one manifest edit, so a crash leaves a keyspace either fully
//! there or fully gone.

use super::def::check_name;
use super::def::DEFAULT_KEYSPACE;
use super::handle::Keyspace;
use super::options::KeyspaceOptions;
use crate::db::Db;
use crate::error::{Error, ErrorKind, Result};
use crate::version::{KeyspaceEdit, VersionEdit};

impl Db {
    /// The keyspace `name`, created (with `opts`, durably) if the database
    /// has none of that name. `"default"` names the default keyspace, whose
    /// table options are the database's [`Options`](crate::Options).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a name that is empty or longer than
    /// [`MAX_KEYSPACE_NAME`](crate::MAX_KEYSPACE_NAME) bytes, an option
    /// out of range, or a table option that differs from the one an
    /// existing keyspace was created with (see [`KeyspaceOptions`]);
    /// `ReadOnly` to create one in a database opened read-only; `Io` if
    /// the manifest could not be written.
    pub fn keyspace(&self, name: &str, opts: KeyspaceOptions) -> Result<Keyspace> {
        check_name(name)?;
        let inner = self.inner();
        let mut st = inner.state.lock();
        if name == DEFAULT_KEYSPACE {
            if opts.sets_table_options() {
                return Err(Error::invalid(
                    "the default keyspace's table options are the database's Options",
                ));
            }
            if opts.compaction_filter.is_some() {
                return Err(Error::invalid(
                    "the default keyspace's compaction filter is Options::compaction_filter",
                ));
            }
            return Ok(self.default_keyspace());
        }
        let existing = st
            .trees
            .iter()
            .find(|t| t.def.as_ref().is_some_and(|d| d.name == name));
        if let Some(t) = existing {
            opts.check_matches(t.def.as_ref().expect("found by its definition"))?;
            if let Some(f) = opts.compaction_filter {
                *t.handle.filter.write() = Some(f);
            }
            return Ok(Keyspace {
                inner: inner.clone(),
                tree: t.handle.clone(),
            });
        }
        if inner.read_only {
            return Err(Error::new(
                ErrorKind::ReadOnly,
                format!("no keyspace {name:?}, and a read-only database cannot create one"),
            ));
        }
        inner.check_bg_error(&st)?;
        let def = opts.definition(name, &inner.opts)?;
        let id = st.next_keyspace_id;
        let next = id
            .checked_add(1)
            .ok_or_else(|| Error::invalid("no keyspace id is left"))?;
        let edit = VersionEdit {
            next_keyspace_id: Some(next),
            keyspaces: vec![KeyspaceEdit {
                id,
                create: Some(def),
                // Its data will be in the live WAL and later ones.
                log_number: Some(st.live_wal),
                ..KeyspaceEdit::default()
            }],
            ..VersionEdit::default()
        };
        inner.install(&mut st, edit)?;
        let t = st.tree(id).expect("installed");
        if let Some(f) = opts.compaction_filter {
            *t.handle.filter.write() = Some(f);
        }
        Ok(Keyspace {
            inner: inner.clone(),
            tree: t.handle.clone(),
        })
    }

    /// A handle on the default keyspace (the keys of `Db::put`, `Db::get`...).
    pub fn default_keyspace(&self) -> Keyspace {
        Keyspace {
            inner: self.inner().clone(),
            tree: self.inner().default_handle.clone(),
        }
    }

    /// The names of the keyspaces, `"default"` first, then in the order
    /// they were created.
    pub fn keyspace_names(&self) -> Vec<String> {
        let st = self.inner().state.lock();
        st.trees.iter().map(|t| t.handle.name.clone()).collect()
    }

    /// Drops keyspace `name` and every key in it: one manifest edit, so a
    /// crash leaves it either there, whole, or gone. Its tables are deleted
    /// once no iterator or snapshot read of it is running; its handles fail
    /// every call from now on. Writes to it that race with the drop are
    /// lost with it.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for the default keyspace or a name no keyspace
    /// has; `ReadOnly` on a database opened read-only; `Io` if the
    /// manifest could not be written.
    pub fn drop_keyspace(&self, name: &str) -> Result<()> {
        if name == DEFAULT_KEYSPACE {
            return Err(Error::invalid("the default keyspace cannot be dropped"));
        }
        let inner = self.inner();
        if inner.read_only {
            return Err(crate::db::state::read_only_error());
        }
        {
            let mut st = inner.state.lock();
            inner.check_bg_error(&st)?;
            let Some(id) = st
                .trees
                .iter()
                .find(|t| t.def.as_ref().is_some_and(|d| d.name == name))
                .map(|t| t.id())
            else {
                return Err(Error::invalid(format!("no keyspace {name:?}")));
            };
            // The WALs only it needed are not needed any more.
            let log = st
                .trees
                .iter()
                .filter(|t| t.id() != id)
                .map(|t| t.min_live_wal())
                .min()
                .map(|n| n.max(st.wals.log_number()));
            let edit = VersionEdit {
                dropped_keyspaces: vec![id],
                log_number: log,
                ..VersionEdit::default()
            };
            inner.install(&mut st, edit)?;
            inner.bg_cv.notify_all();
            // A flush of it waits for a keyspace that is gone now.
            inner.done_cv.notify_all();
        }
        inner.delete_obsolete_files();
        Ok(())
    }
}
