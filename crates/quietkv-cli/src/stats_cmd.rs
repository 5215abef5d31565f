//! `quietkv stats`: the engine's `DbStats` as a table or one JSON object.
//!
//! Counters (writes, flushes, compaction work, cache and I/O counters) are
//! those of this process since it opened the database; the tree shape
//! (levels) and the last sequence number are the database's.

use std::io::{self, Write};

use quietkv::DbStats;
use serde_json::{json, Map, Value};

pub fn to_json(s: &DbStats) -> Value {
    let levels: Vec<Value> = s
        .levels
        .iter()
        .enumerate()
        .map(|(l, ls)| {
            let c = &ls.compaction_into;
            json!({
                "level": l,
                "files": ls.files,
                "bytes": ls.bytes,
                "compaction_into": {
                    "merges": c.merges,
                    "read_from_above_bytes": c.read_from_above_bytes,
                    "read_from_level_bytes": c.read_from_level_bytes,
                    "written_bytes": c.written_bytes,
                    "moves": c.moves,
                    "moved_bytes": c.moved_bytes,
                },
            })
        })
        .collect();
    let c = &s.block_cache;
    let mut io = Map::new();
    for (class, st) in &s.io {
        let mode = s
            .io_modes
            .iter()
            .find(|(c, _)| c == class)
            .map(|(_, m)| m.name());
        io.insert(
            class.name().to_string(),
            json!({
                "mode": mode,
                "read_bytes": st.read_bytes,
                "read_ops": st.read_ops,
                "read_nanos": st.read_nanos,
                "write_bytes": st.write_bytes,
                "write_ops": st.write_ops,
                "write_nanos": st.write_nanos,
                "sync_ops": st.sync_ops,
                "sync_nanos": st.sync_nanos,
                "cache_hits": st.cache_hits,
                "cache_misses": st.cache_misses,
                "throttle_nanos": st.throttle_nanos,
            }),
        );
    }
    json!({
        "levels": levels,
        "last_sequence": s.last_sequence,
        "writes": s.writes,
        "write_bytes": s.write_bytes,
        "write_groups": s.write_groups,
        "write_batches": s.write_batches,
        "memtable_bytes": s.memtable_bytes,
        "immutable_memtables": s.immutable_memtables,
        "all_memtables_bytes": s.all_memtables_bytes,
        "flushes": s.flushes,
        "flush_bytes": s.flush_bytes,
        "flush_seconds": s.flush_seconds,
        "flush_cpu_seconds": s.flush_cpu_seconds,
        "compaction": {
            "count": s.compaction.count,
            "bytes_read": s.compaction.bytes_read,
            "bytes_written": s.compaction.bytes_written,
            "seconds": s.compaction.seconds,
            "cpu_seconds": s.compaction.cpu_seconds,
            "running": s.compaction.running,
            "open_files": s.compaction.open_files,
            "warmed_blocks": s.compaction.warmed_blocks,
            "warmed_bytes": s.compaction.warmed_bytes,
        },
        "stalls": {
            "slowdowns": s.stalls.slowdowns,
            "stops": s.stalls.stops,
            "stall_seconds": s.stalls.stall_seconds,
        },
        "block_cache": {
            "capacity": c.capacity,
            "usage": c.usage,
            "entries": c.entries,
            "hits": c.hits,
            "misses": c.misses,
            "inserts": c.inserts,
            "evictions": c.evictions,
        },
        "open_tables": s.open_tables,
        "io": io,
        "background_error": s.background_error.as_ref().map(ToString::to_string),
    })
}

pub fn print_human(out: &mut impl Write, s: &DbStats) -> io::Result<()> {
    // The compaction columns are the work that ended in each level since
    // open: merges, their input bytes from shallower levels and from the
    // level itself, bytes written, and trivial moves.
    writeln!(
        out,
        "level  files          bytes   merges  read from above  read from level    written  moves  moved bytes"
    )?;
    for (l, ls) in s.levels.iter().enumerate() {
        let c = &ls.compaction_into;
        writeln!(
            out,
            "L{l:<5} {:>5} {:>14} {:>8} {:>16} {:>16} {:>10} {:>6} {:>12}",
            ls.files,
            ls.bytes,
            c.merges,
            c.read_from_above_bytes,
            c.read_from_level_bytes,
            c.written_bytes,
            c.moves,
            c.moved_bytes
        )?;
    }
    let (files, bytes) = s
        .levels
        .iter()
        .fold((0, 0), |(f, b), l| (f + l.files, b + l.bytes));
    writeln!(out, "total  {files:>5} {bytes:>14}")?;
    writeln!(out)?;
    writeln!(out, "last sequence        {}", s.last_sequence)?;
    writeln!(
        out,
        "writes               {} entries, {} bytes, {} batches in {} groups",
        s.writes, s.write_bytes, s.write_batches, s.write_groups
    )?;
    writeln!(
        out,
        "memtable             {} bytes, {} immutable; every keyspace's memtables {} bytes",
        s.memtable_bytes, s.immutable_memtables, s.all_memtables_bytes
    )?;
    writeln!(
        out,
        "flushes              {} ({} bytes, {:.3} s, {:.3} CPU s)",
        s.flushes, s.flush_bytes, s.flush_seconds, s.flush_cpu_seconds
    )?;
    let cs = &s.compaction;
    writeln!(
        out,
        "compactions          {} (read {} bytes, wrote {} bytes, {:.3} s, {:.3} CPU s; {} running)",
        cs.count, cs.bytes_read, cs.bytes_written, cs.seconds, cs.cpu_seconds, cs.running
    )?;
    writeln!(
        out,
        "stalls               {} slowdowns, {} stops, {:.3} s",
        s.stalls.slowdowns, s.stalls.stops, s.stalls.stall_seconds
    )?;
    let c = &s.block_cache;
    writeln!(
        out,
        "block cache          {} hits, {} misses, {} / {} bytes, {} entries",
        c.hits, c.misses, c.usage, c.capacity, c.entries
    )?;
    writeln!(out, "open tables          {}", s.open_tables)?;
    if let Some(e) = &s.background_error {
        writeln!(out, "background error     {e}")?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:<16} {:<10} {:>14} {:>9} {:>14} {:>9} {:>7} {:>10} {:>10}",
        "class",
        "mode",
        "read bytes",
        "reads",
        "write bytes",
        "writes",
        "syncs",
        "pc hits",
        "pc misses"
    )?;
    for (class, st) in &s.io {
        let mode = s
            .io_modes
            .iter()
            .find(|(c, _)| c == class)
            .map_or("?", |(_, m)| m.name());
        writeln!(
            out,
            "{:<16} {:<10} {:>14} {:>9} {:>14} {:>9} {:>7} {:>10} {:>10}",
            class.name(),
            mode,
            st.read_bytes,
            st.read_ops,
            st.write_bytes,
            st.write_ops,
            st.sync_ops,
            st.cache_hits,
            st.cache_misses
        )?;
    }
    Ok(())
}
