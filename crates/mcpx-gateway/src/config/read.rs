//! Reading the configuration file: only a regular file, and at most
//! `MCPX_MAX_CONFIG_BYTES` of it.
//!
//! * The path's metadata is checked first. A FIFO, a device, a socket or a directory
//!   is refused without being opened: a FIFO with no writer would block `open(2)`,
//!   and `/dev/zero` would never end.
//! * The file is then opened with `O_NONBLOCK`, so a FIFO put in its place after the
//!   check does not block either, and the opened file is checked again.
//! * At most the cap and one byte are read: a larger file is refused before it is
//!   parsed, whatever its size.
//!
//! [`read`] blocks on the disk: an async caller uses [`super::load_async`], which
//! runs it on a blocking thread.

use std::ffi::OsStr;
use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::num::{NonZeroU64, ParseIntError};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::sync::OnceLock;

use super::ConfigError;

/// The variable that sets the largest configuration file mcpx reads, in bytes.
pub const MAX_CONFIG_BYTES_ENV: &str = "MCPX_MAX_CONFIG_BYTES";

/// The largest configuration file mcpx reads when [`MAX_CONFIG_BYTES_ENV`] is not
/// set: 4 MiB.
pub const DEFAULT_MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// [`MAX_CONFIG_BYTES_ENV`] is set, but not to a number of bytes of at least 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{MAX_CONFIG_BYTES_ENV}={value:?} is not a number of bytes of at least 1: {source}")]
pub struct MaxBytesError {
    /// The value, as set (lossily decoded).
    pub value: String,
    /// Why it is not a number of bytes.
    pub source: ParseIntError,
}

/// What a path names when it is not a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A directory.
    Directory,
    /// A FIFO (a named pipe).
    Fifo,
    /// A character device, such as `/dev/zero`.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A Unix socket.
    Socket,
    /// Anything else that is not a regular file.
    Other,
}

impl std::fmt::Display for FileKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a FIFO (named pipe)",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Socket => "a socket",
            FileKind::Other => "not a regular file",
        })
    }
}

/// The largest configuration file mcpx reads: [`MAX_CONFIG_BYTES_ENV`], read once
/// per process, else [`DEFAULT_MAX_CONFIG_BYTES`].
pub fn max_config_bytes() -> Result<u64, MaxBytesError> {
    static MAX: OnceLock<Result<u64, MaxBytesError>> = OnceLock::new();
    MAX.get_or_init(|| max_bytes_from(std::env::var_os(MAX_CONFIG_BYTES_ENV).as_deref()))
        .clone()
}

/// The cap a value of [`MAX_CONFIG_BYTES_ENV`] sets (`None`: not set, the default).
pub fn max_bytes_from(value: Option<&OsStr>) -> Result<u64, MaxBytesError> {
    let Some(value) = value else {
        return Ok(DEFAULT_MAX_CONFIG_BYTES);
    };
    let value = value.to_string_lossy();
    value
        .parse::<NonZeroU64>()
        .map(NonZeroU64::get)
        .map_err(|source| MaxBytesError {
            value: value.into_owned(),
            source,
        })
}

/// The text of the configuration file at `path`, a regular file of at most `max`
/// bytes. Anything else is refused without blocking: [`ConfigError::NotAFile`] for a
/// FIFO, a device or a directory, [`ConfigError::TooLarge`] beyond `max`.
pub fn read(path: &Path, max: u64) -> Result<String, ConfigError> {
    let failed = |source| ConfigError::Read {
        path: path.to_owned(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(failed)?;
    check(path, &meta, max)?;
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits() | nix::fcntl::OFlag::O_NOCTTY.bits())
        .open(path)
        .map_err(failed)?;
    // The name may have been given to something else since the check.
    let meta = File::metadata(&file).map_err(failed)?;
    check(path, &meta, max)?;
    let expected = usize::try_from(meta.len().min(max)).unwrap_or(0);
    let mut bytes = Vec::with_capacity(expected.saturating_add(1));
    (&mut file)
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > max {
        return Err(too_large(path, max));
    }
    String::from_utf8(bytes)
        .map_err(|e| failed(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// Refuses what is not a regular file, and a regular file over `max`.
fn check(path: &Path, meta: &Metadata, max: u64) -> Result<(), ConfigError> {
    let t = meta.file_type();
    if !t.is_file() {
        let kind = if t.is_dir() {
            FileKind::Directory
        } else if t.is_fifo() {
            FileKind::Fifo
        } else if t.is_char_device() {
            FileKind::CharDevice
        } else if t.is_block_device() {
            FileKind::BlockDevice
        } else if t.is_socket() {
            FileKind::Socket
        } else {
            FileKind::Other
        };
        return Err(ConfigError::NotAFile {
            path: path.to_owned(),
            kind,
        });
    }
    if meta.len() > max {
        return Err(too_large(path, max));
    }
    Ok(())
}

fn too_large(path: &Path, max: u64) -> ConfigError {
    ConfigError::TooLarge {
        path: path.to_owned(),
        max,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::time::Duration;

    /// `read` on another thread, failing the test after 5 s instead of hanging it (a
    /// read of `/dev/zero` or an open of a FIFO that blocks).
    fn read_within(path: &Path, max: u64) -> Result<String, ConfigError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.to_owned();
        std::thread::spawn(move || {
            let _ = tx.send(read(&p, max));
        });
        rx.recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("reading {} did not end within 5 s", path.display()))
    }

    #[test]
    fn a_directory_a_device_and_a_fifo_are_refused_by_kind() {
        let dir = mcpx_testkit::scratch::dir("config-read-kinds");
        let fifo = dir.join("fifo.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        for (path, kind) in [
            (dir.clone(), FileKind::Directory),
            (Path::new("/dev/zero").to_owned(), FileKind::CharDevice),
            (fifo, FileKind::Fifo),
        ] {
            let e = read_within(&path, DEFAULT_MAX_CONFIG_BYTES).unwrap_err();
            assert!(
                matches!(&e, ConfigError::NotAFile { path: p, kind: k } if *p == path && *k == kind),
                "{}: {e:?}",
                path.display()
            );
            let text = e.to_string();
            assert!(
                text.starts_with(&path.display().to_string()) && text.contains(&kind.to_string()),
                "{text}"
            );
        }
    }

    #[test]
    fn a_file_over_the_cap_is_refused_naming_the_cap_and_the_variable() {
        let dir = mcpx_testkit::scratch::dir("config-read-cap");
        let file = dir.join("c.json");
        std::fs::write(&file, format!("{{}}{}", " ".repeat(99))).unwrap();
        assert_eq!(read_within(&file, 101).unwrap().len(), 101);
        let e = read_within(&file, 100).unwrap_err();
        assert!(matches!(e, ConfigError::TooLarge { max: 100, .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains("100 bytes") && text.contains(MAX_CONFIG_BYTES_ENV),
            "{text}"
        );
    }

    #[test]
    fn the_cap_is_a_positive_number_of_bytes_or_the_default() {
        assert_eq!(max_bytes_from(None), Ok(DEFAULT_MAX_CONFIG_BYTES));
        assert_eq!(max_bytes_from(Some(OsStr::new("1000"))), Ok(1000));
        for bad in ["0", "-1", "4MiB", "", " 10"] {
            let e = max_bytes_from(Some(&OsString::from(bad))).unwrap_err();
            assert_eq!(e.value, bad);
            let text = e.to_string();
            assert!(
                text.starts_with(&format!("{MAX_CONFIG_BYTES_ENV}={bad:?}")),
                "{text}"
            );
        }
    }
}
