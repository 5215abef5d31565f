//! A minimal stderr logger: the engine and quietio log fallbacks and
//! background errors through `log`; the CLI shows warnings and errors.

use log::{Level, Metadata, Record};

struct StderrLogger {
    level: Level,
}

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= self.level
    }

    fn log(&self, record: &Record) {
        if self.enabled(record.metadata()) {
            eprintln!("{}: {}", record.level().as_str().to_lowercase(), record.args());
        }
    }

    fn flush(&self) {}
}

/// Installs the logger; `QUIETKV_LOG=debug|info|warn|error` changes the level.
pub fn init() {
    let level = match std::env::var("QUIETKV_LOG").as_deref() {
        Ok("debug") => Level::Debug,
        Ok("info") => Level::Info,
        Ok("error") => Level::Error,
        Ok("trace") => Level::Trace,
        _ => Level::Warn,
    };
    let logger = Box::leak(Box::new(StderrLogger { level }));
    if log::set_logger(logger).is_ok() {
        log::set_max_level(level.to_level_filter());
    }
}
