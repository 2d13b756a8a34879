//! The store of a user's OAuth tokens and client registrations, per user under the
//! XDG state directory (`$XDG_STATE_HOME/mcpx/oauth`, else
//! `~/.local/state/mcpx/oauth`): the directory is 0700 and every file 0600.
//!
//! * `tokens/<key>.json`: one token set, keyed by (issuer, client id, resource),
//!   never by mcpx's version.
//! * `clients/<key>.json`: one Dynamic Client Registration, keyed by the
//!   authorization server's `issuer` and the redirect URI it was made for (a
//!   registration is never used with another issuer).
//! * `upstreams/<key>.json`: which token set an upstream (by its URL) uses.
//! * `asked/<key>.json`: that an upstream (by its URL) refused a request for want of
//!   authorization (a 401), and when it first did: `mcpx auth status` tells "needs
//!   login" from "not needed so far" by it.
//!
//! Every write goes to a temporary file in the same directory, is synced, and renamed
//! over the old one: a reader sees the old file or the new one, never half of one.
//! [`Store::lock_token`] takes an advisory lock (`flock`) on `<file>.lock` beside a file,
//! which serialises refreshes across processes; whoever takes it re-reads the file.

use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Why the store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No directory for the store: neither `XDG_STATE_HOME` nor `HOME` is set.
    #[error("no state directory for the token store: set XDG_STATE_HOME or HOME")]
    NoStateDir,
    /// A file system operation failed.
    #[error("the token store's {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A stored file is not what mcpx writes.
    #[error("the token store's {path} is unreadable: {source}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

/// One token set, as stored.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// The authorization server's `issuer`.
    pub issuer: String,
    /// The client id the tokens were issued to.
    pub client_id: String,
    /// The resource (RFC 8707) they were issued for.
    pub resource: String,
    /// The token endpoint they are refreshed at.
    pub token_endpoint: String,
    /// How the client authenticates there: `none`, `client_secret_basic` or
    /// `client_secret_post`.
    pub auth_method: String,
    /// The access token.
    pub access_token: String,
    /// The refresh token, if one was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires (seconds since the Unix epoch), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The scope granted (space-separated; the one asked for when the server said
    /// none).
    #[serde(default)]
    pub scope: String,
}

impl std::fmt::Debug for TokenRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The tokens stay out of logs.
        f.debug_struct("TokenRecord")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("resource", &self.resource)
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// A client registration with an authorization server (RFC 7591 §3.2.1).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRecord {
    /// The server's `issuer`.
    pub issuer: String,
    /// The redirect URI registered.
    pub redirect_uri: String,
    /// The client id issued.
    pub client_id: String,
    /// The client secret issued, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The `token_endpoint_auth_method` registered.
    pub auth_method: String,
}

impl std::fmt::Debug for ClientRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientRecord")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("auth_method", &self.auth_method)
            .finish_non_exhaustive()
    }
}

/// Which token set an upstream uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// The upstream's URL, as configured.
    pub url: String,
    /// The token set's key: issuer.
    pub issuer: String,
    /// The token set's key: client id.
    pub client_id: String,
    /// The token set's key: resource.
    pub resource: String,
    /// A scope a refusal (403 `insufficient_scope`) asked for beyond the one granted,
    /// which the next login asks for too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wanted_scope: Option<String>,
}

/// That an upstream asked for authorization: it refused a request with a 401.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Asked {
    /// The upstream's URL, as configured.
    pub url: String,
    /// When it was first seen to (seconds since the Unix epoch).
    pub at: u64,
    /// Whether the refusal carried a `WWW-Authenticate` challenge.
    #[serde(default)]
    pub challenge: bool,
}

/// The store.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

/// An exclusive advisory lock on one of the store's keys, held until dropped.
#[derive(Debug)]
pub struct Lock {
    _flock: nix::fcntl::Flock<File>,
}

/// The hex SHA-256 of the parts, each ended by a NUL: a file name for a key.
fn key(parts: &[&str]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for p in parts {
        ctx.update(p.as_bytes());
        ctx.update(&[0]);
    }
    ctx.finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Store {
    /// The store of this user: `$XDG_STATE_HOME/mcpx/oauth`, else
    /// `$HOME/.local/state/mcpx/oauth`. Nothing is created until written.
    pub fn default_location() -> Result<Store, StoreError> {
        let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
            Some(d) if Path::new(&d).is_absolute() => PathBuf::from(d),
            _ => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
                Some(h) => PathBuf::from(h).join(".local").join("state"),
                None => return Err(StoreError::NoStateDir),
            },
        };
        Ok(Store::at(base.join("mcpx").join("oauth")))
    }

    /// The store in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
        move |source| StoreError::Io {
            path: path.to_owned(),
            source,
        }
    }

    /// `dir/sub`, created 0700 (the store's directory too), its mode corrected when
    /// it exists with a wider one.
    fn subdir(&self, sub: &str) -> Result<PathBuf, StoreError> {
        for d in [self.dir.clone(), self.dir.join(sub)] {
            match fs::DirBuilder::new().recursive(true).mode(0o700).create(&d) {
                Ok(()) => {}
                Err(e) => return Err(Self::io(&d)(e)),
            }
            let meta = fs::metadata(&d).map_err(Self::io(&d))?;
            if meta.permissions().mode() & 0o077 != 0 {
                fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).map_err(Self::io(&d))?;
            }
        }
        Ok(self.dir.join(sub))
    }

    fn path(&self, sub: &str, key: &str) -> PathBuf {
        self.dir.join(sub).join(format!("{key}.json"))
    }

    fn read<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, StoreError> {
        match fs::read(path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|source| StoreError::Corrupt {
                        path: path.to_owned(),
                        source,
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Self::io(path)(e)),
        }
    }

    /// Writes `value` to `sub/key.json`: a 0600 temporary file, synced, renamed over.
    fn write<T: Serialize>(&self, sub: &str, key: &str, value: &T) -> Result<(), StoreError> {
        let dir = self.subdir(sub)?;
        let path = self.path(sub, key);
        let mut rand = [0u8; 8];
        let _ = getrandom::fill(&mut rand);
        let tmp = dir.join(format!(
            ".{key}.{}.{:016x}.tmp",
            std::process::id(),
            u64::from_le_bytes(rand)
        ));
        let bytes = serde_json::to_vec_pretty(value).map_err(|source| StoreError::Corrupt {
            path: path.clone(),
            source,
        })?;
        let result = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            fs::rename(&tmp, &path)
        })();
        if let Err(e) = result {
            let _ = fs::remove_file(&tmp);
            return Err(Self::io(&path)(e));
        }
        Ok(())
    }

    fn remove(path: &Path) -> Result<bool, StoreError> {
        match fs::remove_file(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Self::io(path)(e)),
        }
    }

    fn token_key(issuer: &str, client_id: &str, resource: &str) -> String {
        key(&["token", issuer, client_id, resource])
    }

    /// The token set for (issuer, client id, resource), if stored.
    pub fn token(
        &self,
        issuer: &str,
        client_id: &str,
        resource: &str,
    ) -> Result<Option<TokenRecord>, StoreError> {
        Self::read(&self.path("tokens", &Self::token_key(issuer, client_id, resource)))
    }

    /// Stores a token set under its key.
    pub fn put_token(&self, t: &TokenRecord) -> Result<(), StoreError> {
        self.write(
            "tokens",
            &Self::token_key(&t.issuer, &t.client_id, &t.resource),
            t,
        )
    }

    /// Removes the token set for (issuer, client id, resource); whether there was one.
    pub fn remove_token(
        &self,
        issuer: &str,
        client_id: &str,
        resource: &str,
    ) -> Result<bool, StoreError> {
        Self::remove(&self.path("tokens", &Self::token_key(issuer, client_id, resource)))
    }

    /// Takes the exclusive lock of the token set for (issuer, client id, resource),
    /// waiting for whoever holds it (a blocking call: run it off the event loop).
    pub fn lock_token(
        &self,
        issuer: &str,
        client_id: &str,
        resource: &str,
    ) -> Result<Lock, StoreError> {
        self.lock("tokens", &Self::token_key(issuer, client_id, resource))
    }

    fn lock(&self, sub: &str, key: &str) -> Result<Lock, StoreError> {
        let dir = self.subdir(sub)?;
        let path = dir.join(format!("{key}.lock"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(Self::io(&path))?;
        let flock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, errno)| Self::io(&path)(std::io::Error::from(errno)))?;
        Ok(Lock { _flock: flock })
    }

    fn client_key(issuer: &str, redirect_uri: &str) -> String {
        key(&["client", issuer, redirect_uri])
    }

    /// The registration with `issuer` for `redirect_uri`, if stored.
    pub fn client(
        &self,
        issuer: &str,
        redirect_uri: &str,
    ) -> Result<Option<ClientRecord>, StoreError> {
        let found: Option<ClientRecord> =
            Self::read(&self.path("clients", &Self::client_key(issuer, redirect_uri)))?;
        // Never another issuer's, whatever the file says.
        Ok(found.filter(|c| c.issuer == issuer && c.redirect_uri == redirect_uri))
    }

    /// Stores a registration.
    pub fn put_client(&self, c: &ClientRecord) -> Result<(), StoreError> {
        self.write("clients", &Self::client_key(&c.issuer, &c.redirect_uri), c)
    }

    /// Removes a registration; whether there was one.
    pub fn remove_client(&self, issuer: &str, redirect_uri: &str) -> Result<bool, StoreError> {
        Self::remove(&self.path("clients", &Self::client_key(issuer, redirect_uri)))
    }

    fn binding_key(url: &str) -> String {
        key(&["upstream", url])
    }

    /// Which token set the upstream at `url` uses, if any.
    pub fn binding(&self, url: &str) -> Result<Option<Binding>, StoreError> {
        let found: Option<Binding> = Self::read(&self.path("upstreams", &Self::binding_key(url)))?;
        Ok(found.filter(|b| b.url == url))
    }

    /// Records which token set an upstream uses.
    pub fn put_binding(&self, b: &Binding) -> Result<(), StoreError> {
        self.write("upstreams", &Self::binding_key(&b.url), b)
    }

    /// Forgets which token set the upstream at `url` uses; whether it was recorded.
    pub fn remove_binding(&self, url: &str) -> Result<bool, StoreError> {
        Self::remove(&self.path("upstreams", &Self::binding_key(url)))
    }

    fn asked_key(url: &str) -> String {
        key(&["asked", url])
    }

    /// Whether the upstream at `url` was seen to ask for authorization, and when.
    pub fn asked(&self, url: &str) -> Result<Option<Asked>, StoreError> {
        let found: Option<Asked> = Self::read(&self.path("asked", &Self::asked_key(url)))?;
        Ok(found.filter(|a| a.url == url))
    }

    /// Records that the upstream asked for authorization (the first time is kept).
    pub fn put_asked(&self, a: &Asked) -> Result<(), StoreError> {
        if self.asked(&a.url)?.is_some() {
            return Ok(());
        }
        self.write("asked", &Self::asked_key(&a.url), a)
    }

    /// Takes the lock of the upstream at `url`'s login (one login at a time across
    /// processes; blocking).
    pub fn lock_upstream(&self, url: &str) -> Result<Lock, StoreError> {
        self.lock("upstreams", &Self::binding_key(url))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "mcpx-store-{tag}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn record(access: &str) -> TokenRecord {
        TokenRecord {
            issuer: "https://as.example".into(),
            client_id: "c".into(),
            resource: "https://mcp.example/mcp".into(),
            token_endpoint: "https://as.example/token".into(),
            auth_method: "none".into(),
            access_token: access.into(),
            refresh_token: Some("r".into()),
            expires_at: Some(1),
            scope: "a b".into(),
        }
    }

    #[test]
    fn files_are_0600_in_a_0700_directory_and_keys_do_not_mix() {
        let dir = scratch("modes");
        let store = Store::at(dir.join("oauth"));
        let t = record("a1");
        store.put_token(&t).unwrap();
        assert_eq!(
            store
                .token(&t.issuer, &t.client_id, &t.resource)
                .unwrap()
                .as_ref(),
            Some(&t)
        );
        // Another key of each part finds nothing.
        assert!(
            store
                .token("https://as2.example", "c", &t.resource)
                .unwrap()
                .is_none()
        );
        assert!(store.token(&t.issuer, "c2", &t.resource).unwrap().is_none());
        assert!(
            store
                .token(&t.issuer, "c", "https://mcp.example/")
                .unwrap()
                .is_none()
        );
        for d in [store.dir().to_owned(), store.dir().join("tokens")] {
            assert_eq!(
                fs::metadata(&d).unwrap().permissions().mode() & 0o777,
                0o700,
                "{d:?}"
            );
        }
        let _lock = store
            .lock_token(&t.issuer, &t.client_id, &t.resource)
            .unwrap();
        let mut files = 0;
        for e in fs::read_dir(store.dir().join("tokens")).unwrap() {
            let e = e.unwrap();
            assert_eq!(e.metadata().unwrap().permissions().mode() & 0o777, 0o600);
            files += 1;
        }
        // The token and its lock; no temporary file left behind.
        assert_eq!(files, 2);
        // A wider directory mode is narrowed on the next write.
        fs::set_permissions(store.dir(), fs::Permissions::from_mode(0o755)).unwrap();
        store.put_token(&record("a2")).unwrap();
        assert_eq!(
            fs::metadata(store.dir()).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert!(
            store
                .remove_token(&t.issuer, &t.client_id, &t.resource)
                .unwrap()
        );
        assert!(
            !store
                .remove_token(&t.issuer, &t.client_id, &t.resource)
                .unwrap()
        );
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn a_registration_is_never_another_issuers() {
        let dir = scratch("clients");
        let store = Store::at(&dir);
        let c = ClientRecord {
            issuer: "https://as1".into(),
            redirect_uri: "http://127.0.0.1:1/callback".into(),
            client_id: "id1".into(),
            client_secret: None,
            auth_method: "none".into(),
        };
        store.put_client(&c).unwrap();
        assert_eq!(
            store.client("https://as1", &c.redirect_uri).unwrap(),
            Some(c.clone())
        );
        assert_eq!(store.client("https://as2", &c.redirect_uri).unwrap(), None);
        // A file copied under another issuer's key is not taken for that issuer's.
        let theirs = store.path(
            "clients",
            &Store::client_key("https://as2", &c.redirect_uri),
        );
        fs::copy(
            store.path(
                "clients",
                &Store::client_key("https://as1", &c.redirect_uri),
            ),
            &theirs,
        )
        .unwrap();
        assert_eq!(store.client("https://as2", &c.redirect_uri).unwrap(), None);
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn the_lock_excludes_another_holder_until_dropped() {
        let dir = scratch("lock");
        let store = Store::at(&dir);
        let first = store.lock_token("i", "c", "r").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let other = store.clone();
        let t = std::thread::spawn(move || {
            let _second = other.lock_token("i", "c", "r").unwrap();
            tx.send(()).unwrap();
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(300))
                .is_err()
        );
        drop(first);
        assert!(rx.recv_timeout(std::time::Duration::from_secs(5)).is_ok());
        t.join().unwrap();
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn an_upstream_that_asked_is_recorded_once_by_its_url() {
        let dir = scratch("asked");
        let store = Store::at(&dir);
        let url = "https://mcp.example/mcp";
        assert_eq!(store.asked(url).unwrap(), None);
        let first = Asked {
            url: url.into(),
            at: 10,
            challenge: true,
        };
        store.put_asked(&first).unwrap();
        store
            .put_asked(&Asked {
                at: 20,
                ..first.clone()
            })
            .unwrap();
        assert_eq!(store.asked(url).unwrap(), Some(first));
        assert_eq!(store.asked("https://mcp.example/").unwrap(), None);
        assert_eq!(
            fs::metadata(store.dir().join("asked"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o700
        );
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn a_corrupt_file_is_an_error_that_names_it_and_no_token() {
        let dir = scratch("corrupt");
        let store = Store::at(&dir);
        store.put_token(&record("a")).unwrap();
        let path = store.path(
            "tokens",
            &Store::token_key("https://as.example", "c", "https://mcp.example/mcp"),
        );
        fs::write(&path, b"{\"access_token\": \"secret\"").unwrap();
        let e = store
            .token("https://as.example", "c", "https://mcp.example/mcp")
            .unwrap_err()
            .to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(!e.contains("secret"), "{e}");
        let _ = fs::remove_dir_all(dir);
    }
}
