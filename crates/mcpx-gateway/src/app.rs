//! The application: configuration → gateway → the serve seam, with reload, status
//! and shutdown. `mcpx serve` is this plus a listener; tests use it in-process.
//!
//! * [`App::start`] starts every upstream's supervisor and returns at once.
//! * [`App::watch`] reloads when the configuration file changes (debounced
//!   `reloadDebounceMs`) and on SIGHUP, reading the file on a blocking thread. A file
//!   that does not parse, or is refused (not a regular file, over
//!   `MCPX_MAX_CONFIG_BYTES`), is reported with its path and reason, and the
//!   configuration in force keeps serving.
//! * Every reload, whatever asked for it ([`ReloadTrigger`]), goes through
//!   [`App::reload_for`] or [`App::reload_async`], which tell the observer
//!   [`App::on_reload`] set (the daemon publishes it as an event) its trigger and its
//!   outcome.
//! * [`App::shutdown`] ends hosts' listen streams and stops every upstream (a child
//!   gets its stdin closed, then SIGTERM to its process group, then SIGKILL), so no
//!   upstream process outlives mcpx.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Duration;

use mcpx_client::EraCache;
use mcpx_server::Seam;

use crate::config::{self, Config, ConfigError};
use crate::gateway::{Gateway, Served};
use crate::reload::Plan;
use crate::upstream::{Connector, Status};
use crate::watch::{ConfigWatcher, WatchError};

/// How long [`App::shutdown`] waits for upstreams to stop: enough for a child's
/// stop sequence (stdin closed, 2 s, SIGTERM, 2 s, SIGKILL).
pub const STOP_WITHIN: Duration = Duration::from_secs(5);

/// Adjustments the command line makes to every configuration read (`--mcp-spec`).
/// A `String` error: the caller's own message is all a reload can report.
pub type Adjust = Arc<dyn Fn(&mut Config) -> Result<(), String> + Send + Sync>;

/// What asked for a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadTrigger {
    /// The file watcher saw the configuration file change.
    File,
    /// SIGHUP.
    Hangup,
    /// A request (the daemon's `POST /v1/reload`, a test).
    Asked,
}

impl ReloadTrigger {
    /// A short key: `file`, `sighup` or `asked`.
    pub fn key(self) -> &'static str {
        match self {
            ReloadTrigger::File => "file",
            ReloadTrigger::Hangup => "sighup",
            ReloadTrigger::Asked => "asked",
        }
    }
}

impl std::fmt::Display for ReloadTrigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReloadTrigger::File => "the configuration file changed",
            ReloadTrigger::Hangup => "SIGHUP",
            ReloadTrigger::Asked => "asked to reload",
        })
    }
}

/// Told of every reload: what asked for it and how it went.
pub type ReloadObserver = Arc<dyn Fn(ReloadTrigger, &Result<Plan, ReloadError>) + Send + Sync>;

/// Why a reload did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The app was started without a configuration file (`--demo`).
    #[error("there is no configuration file to reload")]
    NoFile,
    /// The file does not load or parse.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The command line's adjustment refused it.
    #[error("{path}: {message}")]
    Adjust {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// A running gateway and what it was started from.
pub struct App {
    gateway: Arc<Gateway>,
    seam: Arc<Seam<Served>>,
    path: Option<PathBuf>,
    adjust: Option<Adjust>,
    watcher: Mutex<Option<ConfigWatcher>>,
    on_reload: Mutex<Option<ReloadObserver>>,
    history: Option<mcpx_history::History>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl App {
    /// Starts the gateway on `config`, read from `path` (none for a built-in
    /// configuration), whose future reloads `adjust` adjusts as this one was. Must be
    /// called inside a tokio runtime. Upstreams start in the background.
    pub fn start(
        config: Config,
        path: Option<PathBuf>,
        adjust: Option<Adjust>,
        era_cache: EraCache,
    ) -> Arc<App> {
        App::start_with_metrics(config, path, adjust, era_cache, None)
    }

    /// [`App::start`], recording in `metrics` (when `Some`): the host's leg of each
    /// request at the seam, the upstream leg in the gateway, reloads here, and the
    /// gateway's gauges at each scrape.
    pub fn start_with_metrics(
        config: Config,
        path: Option<PathBuf>,
        adjust: Option<Adjust>,
        era_cache: EraCache,
        metrics: Option<Arc<mcpx_metrics::Metrics>>,
    ) -> Arc<App> {
        App::start_linked(
            config,
            path,
            adjust,
            era_cache,
            metrics,
            Arc::new(crate::upstream::Connect),
        )
    }

    /// [`App::start_with_metrics`], whose upstreams' supervisors connect by
    /// `connector`, the factory of their links: [`crate::upstream::Connect`] connects
    /// as configured (what `mcpx serve` does); an in-process test's connector reaches
    /// servers in the test process.
    pub fn start_linked(
        config: Config,
        path: Option<PathBuf>,
        adjust: Option<Adjust>,
        era_cache: EraCache,
        metrics: Option<Arc<mcpx_metrics::Metrics>>,
        connector: Arc<dyn Connector>,
    ) -> Arc<App> {
        let policy = config.spec.clone();
        let history = open_history(&config.history);
        let gateway = Gateway::linked(config, era_cache, metrics.clone(), connector);
        gateway.start();
        let seam = Arc::new(
            Seam::new(
                Arc::new(crate::gateway::served(gateway.clone(), history.clone())),
                "mcpx",
                env!("CARGO_PKG_VERSION"),
                policy,
            )
            .with_metrics(metrics),
        );
        Arc::new(App {
            gateway,
            seam,
            path,
            adjust,
            watcher: Mutex::new(None),
            on_reload: Mutex::new(None),
            history,
        })
    }

    /// The call history's recorder, when calls are recorded (`mcpx.history`). Its
    /// settings are the first configuration's: a reload does not change them.
    pub fn history(&self) -> Option<&mcpx_history::History> {
        self.history.as_ref()
    }

    /// The gateway.
    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    /// The serve seam, for a listener.
    pub fn seam(&self) -> Arc<Seam<Served>> {
        self.seam.clone()
    }

    /// The configuration file, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Each upstream's name and status, in configuration order.
    pub fn status(&self) -> Vec<(String, Status)> {
        self.gateway
            .statuses()
            .into_iter()
            .map(|(u, s)| (u.id.to_string(), s))
            .collect()
    }

    /// Sets the observer told of every reload from now on (replacing any earlier one).
    pub fn on_reload(&self, observer: ReloadObserver) {
        *self.on_reload.lock() = Some(observer);
    }

    /// Reads the configuration file again and applies it, as asked
    /// ([`ReloadTrigger::Asked`]). On any error the configuration in force is left as
    /// it is. The file is read in place by [`config::load`], which reads only a
    /// regular file of at most [`config::max_config_bytes`] and never waits on a FIFO;
    /// an async caller uses [`App::reload_async`], which reads it on a blocking thread.
    pub fn reload(&self) -> Result<Plan, ReloadError> {
        self.reload_for(ReloadTrigger::Asked)
    }

    /// [`App::reload`] for `trigger`: counted in the metrics and told to the
    /// [`App::on_reload`] observer, as every reload is.
    pub fn reload_for(&self, trigger: ReloadTrigger) -> Result<Plan, ReloadError> {
        let loaded = self
            .path
            .as_deref()
            .ok_or(ReloadError::NoFile)
            .and_then(|p| Ok(config::load(Some(p))?));
        self.apply(trigger, loaded)
    }

    /// [`App::reload_for`], the file read on a blocking thread
    /// ([`config::load_async`]): what the watcher and SIGHUP use.
    pub async fn reload_async(&self, trigger: ReloadTrigger) -> Result<Plan, ReloadError> {
        let loaded = match &self.path {
            Some(p) => config::load_async(Some(p.clone()))
                .await
                .map_err(ReloadError::from),
            None => Err(ReloadError::NoFile),
        };
        self.apply(trigger, loaded)
    }

    /// Applies a configuration read for `trigger` (or the error reading it), counts it
    /// in the metrics and tells the observer.
    fn apply(
        &self,
        trigger: ReloadTrigger,
        loaded: Result<(PathBuf, Config), ReloadError>,
    ) -> Result<Plan, ReloadError> {
        let reloaded = loaded.and_then(|(path, config)| self.adjusted(path, config));
        if let Some(m) = self.gateway.metrics()
            && !matches!(reloaded, Err(ReloadError::NoFile))
        {
            m.reloaded(reloaded.is_ok());
        }
        let observer = self.on_reload.lock().clone();
        if let Some(observe) = observer {
            observe(trigger, &reloaded);
        }
        reloaded
    }

    fn adjusted(&self, path: PathBuf, mut config: Config) -> Result<Plan, ReloadError> {
        if let Some(adjust) = &self.adjust {
            adjust(&mut config).map_err(|message| ReloadError::Adjust { path, message })?;
        }
        Ok(self.gateway.reload(config))
    }

    /// Reloads on every change of the configuration file and on SIGHUP, until the
    /// app is dropped. Without a file (`--demo`), SIGHUP is only logged. When the file
    /// cannot be watched the error is returned, and SIGHUP still reloads.
    pub fn watch(self: &Arc<Self>) -> Result<(), WatchError> {
        let debounce = self.gateway.config().global.reload_debounce;
        let (changes, unwatched) = match &self.path {
            Some(p) => match ConfigWatcher::start(p, debounce) {
                Ok((watcher, rx)) => {
                    *self.watcher.lock() = Some(watcher);
                    (Some(rx), None)
                }
                Err(e) => (None, Some(e)),
            },
            None => (None, None),
        };
        let app = Arc::downgrade(self);
        // Before returning, not in the task: a SIGHUP from now on reloads, never kills.
        let mut hangup =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        tokio::spawn(async move {
            let mut changes = changes;
            loop {
                let why = tokio::select! {
                    Some(()) = async {
                        match changes.as_mut() {
                            Some(rx) => rx.recv().await,
                            None => std::future::pending().await,
                        }
                    } => ReloadTrigger::File,
                    Some(()) = async {
                        match hangup.as_mut() {
                            Some(h) => h.recv().await,
                            None => std::future::pending().await,
                        }
                    } => ReloadTrigger::Hangup,
                    else => return,
                };
                let Some(app) = app.upgrade() else { return };
                app.reload_logged(why).await;
            }
        });
        unwatched.map_or(Ok(()), Err)
    }

    /// [`App::reload_async`], with its outcome logged.
    async fn reload_logged(&self, why: ReloadTrigger) {
        match self.reload_async(why).await {
            Ok(plan) => {
                tracing::info!("{why}: reloaded ({plan})");
            }
            Err(ReloadError::NoFile) => {
                tracing::info!("{why}: nothing to reload (no configuration file)");
            }
            Err(e) => {
                // Also on stderr at the default log level: a person edited the file.
                tracing::error!("{why}: not reloaded, the configuration in force goes on: {e}");
            }
        }
    }

    /// Ends hosts' listen streams and stops every upstream, waiting up to
    /// [`STOP_WITHIN`].
    pub async fn shutdown(&self) {
        self.watcher.lock().take();
        self.gateway.shutdown();
        self.gateway.stop_upstreams(STOP_WITHIN).await;
        // Children of starts that failed or were abandoned (a connect timeout drops
        // the start, and its child stops in the background).
        mcpx_transport::child::stop_detached(STOP_WITHIN).await;
    }
}

/// The call history's recorder for `config`, or `None` when it is off or cannot be
/// opened (then mcpx serves without it, and says why once).
fn open_history(config: &crate::config::HistoryConfig) -> Option<mcpx_history::History> {
    let opened = config
        .settings()
        .and_then(|s| s.map(mcpx_history::History::open).transpose());
    match opened {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(error = %e, "the call history is off");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn every_reload_tells_the_observer_its_trigger_and_outcome() {
        let dir = std::env::temp_dir().join(format!("mcpx-app-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.json");
        std::fs::write(&file, r#"{"mcpServers": {}}"#).unwrap();
        let (path, config) = config::load(Some(&file)).unwrap();
        let app = App::start(config, Some(path), None, EraCache::disabled());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        app.on_reload(Arc::new(move |trigger, outcome| {
            log.lock().push((trigger, outcome.is_ok()));
        }));
        assert!(app.reload().is_ok());
        std::fs::write(&file, "{").unwrap();
        assert!(app.reload_for(ReloadTrigger::Hangup).is_err());
        assert_eq!(
            *seen.lock(),
            vec![(ReloadTrigger::Asked, true), (ReloadTrigger::Hangup, false)]
        );
        app.shutdown().await;
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
