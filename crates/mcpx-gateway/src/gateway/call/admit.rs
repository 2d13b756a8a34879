//! Admission: the upstream's connection, taken once for the whole call (or handed in by
//! a caller that took it to read its facts), and a place among its calls in flight
//! (`maxInFlight`; beyond it the call queues, up to `callTimeoutMs`, then is refused
//! busy).

use std::sync::Arc;

use mcpx_client::{Connection, ServerFacts};
use mcpx_server::{Call, Fault};

use crate::error::GatewayError;
use crate::upstream::{InFlight, Upstream};

/// A call admitted at its upstream: the connection it runs on, of `generation`, and
/// the place it holds until dropped.
pub(super) struct Admitted<'a> {
    pub(super) generation: u64,
    pub(super) conn: Connection,
    pub(super) facts: Arc<ServerFacts>,
    pub(super) _in_flight: InFlight<'a>,
}

/// Admits `call` at `up`, on `taken` (a connection of `up` and its generation) when
/// the caller has one still open, else on the one live now.
pub(super) async fn admit<'a>(
    call: &Call,
    up: &'a Upstream,
    taken: Option<(u64, Connection)>,
) -> Result<Admitted<'a>, Fault> {
    let taken = taken.filter(|(_, c)| !c.is_closed());
    let (generation, conn) = match taken.or_else(|| up.live()) {
        Some(c) => c,
        // Boxed, as every exception on a call's path.
        None => Box::pin(up.connection_slow())
            .await
            .map_err(|e| e.to_fault(call.host))?,
    };
    let in_flight = match up.supervisor().try_begin_call() {
        Some(place) => place,
        // Boxed: waiting for a place is the exception.
        None => Box::pin(
            up.supervisor()
                .begin_call_queued(up.config.mcpx.call_timeout),
        )
        .await
        .map_err(|busy| {
            GatewayError::Busy {
                upstream: up.id.clone(),
                busy,
            }
            .to_fault(call.host)
        })?,
    };
    let facts = conn.facts();
    Ok(Admitted {
        generation,
        conn,
        facts,
        _in_flight: in_flight,
    })
}
