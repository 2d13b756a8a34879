//! How the supervisor reaches its upstream: the seam its tests script.

use std::future::Future;

use crate::error::Cause;

/// How the supervisor reaches its upstream.
pub trait Link: Send + Sync + 'static {
    /// A live connection (cheap to clone).
    type Conn: Clone + Send + Sync + 'static;
    /// Connects (spawns, handshakes). The supervisor bounds it with the connect timeout.
    fn connect(&self) -> impl Future<Output = Result<Self::Conn, Cause>> + Send;
    /// Resolves when `conn` is known dead, with why and whether it was a clean exit.
    fn closed(&self, conn: &Self::Conn) -> impl Future<Output = (Cause, bool)> + Send + 'static;
    /// Closes `conn` (for a child: stdin, SIGTERM to its group, SIGKILL).
    fn close(&self, conn: &Self::Conn) -> impl Future<Output = ()> + Send;
    /// One health check.
    fn check(&self, conn: &Self::Conn) -> impl Future<Output = Result<(), Cause>> + Send;
    /// The process id behind `conn`, if it is a process.
    fn pid(&self, conn: &Self::Conn) -> Option<u32>;
}
