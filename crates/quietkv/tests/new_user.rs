//! The program a new user would write first must compile and work as is:
//! a snapshot read after a write, a range forwards and backwards, a
//! prefix, and a range at the snapshot.

use quietkv::{Db, Options};

#[test]
fn the_new_user_program_works_as_written() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))?;
    let dir = tmp.path().to_path_buf();
    {
        let db = Db::open(&dir, Options::default())?;
        for i in 0..100u32 {
            db.put(format!("k{i:03}").as_bytes(), format!("v{i}").as_bytes())?;
        }
    }

    let db = Db::open(&dir, Options::default())?;
    let snap = db.snapshot();
    db.put(b"k000", b"changed")?;
    let old = snap.get(b"k000")?; // the value before
    let ten = db
        .range(&b"k010"[..]..&b"k020"[..])?
        .collect::<Result<Vec<_>, _>>()?;
    let back = db.range(&b"k010"[..]..&b"k020"[..])?.rev().count();
    let p = db.prefix(b"k05")?.count();
    let all_at_snap = snap.range(&b""[..]..)?.count();

    assert_eq!(old, Some(b"v0".to_vec()));
    assert_eq!(db.get(b"k000")?, Some(b"changed".to_vec()));
    let keys: Vec<Vec<u8>> = ten.iter().map(|(k, _)| k.clone()).collect();
    let want: Vec<Vec<u8>> = (10..20).map(|i| format!("k{i:03}").into_bytes()).collect();
    assert_eq!(keys, want);
    assert_eq!(ten[3].1, b"v13");
    assert_eq!(back, 10);
    assert_eq!(p, 10);
    assert_eq!(all_at_snap, 100);
    Ok(())
}

/// `rev()` yields the range backwards, and `next`/`next_back` mixed meet
/// in the middle without repeating a key.
#[test]
fn double_ended_iteration_meets_in_the_middle() -> quietkv::Result<()> {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = Db::open(tmp.path(), Options::default())?;
    for i in 0..9u8 {
        db.put([b'a' + i], [i])?;
    }
    db.flush()?;
    db.delete(b"c")?;
    let rev: Vec<u8> = db.iter()?.rev().map(|r| r.unwrap().0[0]).collect();
    assert_eq!(rev, b"ihgfedba");
    let mut it = db.range(&b"b"[..]..=&b"h"[..])?;
    let mut seen = Vec::new();
    loop {
        let Some(f) = it.next() else { break };
        seen.push(f?.0[0]);
        let Some(b) = it.next_back() else { break };
        seen.push(b?.0[0]);
    }
    assert_eq!(seen, b"bhdgef");
    assert!(it.next().is_none() && it.next_back().is_none());
    Ok(())
}
