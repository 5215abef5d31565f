//! Files opened in one access mode: the sequential writer, the sequential
//! reader, the random reader and the memory-mapped log writer. The mode
//! decides the open flags and which system calls move the bytes; nothing
//! above this module looks at O_DIRECT.
//!
//! From the bottom up, each file importing only the ones above it in
//! this list:
//! - `config`: [`FileConfig`], what a handle knows besides its path, and
//!   opening files with the flags of their mode;
//! - `raw`: the short-transfer-retrying read and write loops and the I/O
//!   error with file and offset;
//! - `read_ahead`, `write_behind`: the io_uring pipelines of direct
//!   sequential files; `writeback_start`: buffered files' write-back
//!   started on the kernel's threads;
//! - `seq_writer`, `seq_reader`, `random_reader`, `mmap_writer`,
//!   `positional`: the file types.

mod config;
mod mmap_writer;
mod positional;
mod random_reader;
mod raw;
mod read_ahead;
mod seq_reader;
mod seq_writer;
mod write_behind;
mod writeback_start;

pub use config::FileConfig;
pub use mmap_writer::MmapWriter;
pub use positional::PositionalFile;
pub use random_reader::RandomReader;
pub use seq_reader::SeqReader;
pub use seq_writer::SeqWriter;
