//! The era bridge of a call: a 2026-07-28 host's call to a legacy upstream runs in a
//! task of its own, parked while the host answers the upstream's asks as
//! `input_required` rounds (register E-1; the ask broker holds the parked call).

use std::sync::Arc;

use mcpx_client::ServerFacts;
use mcpx_protocol::{Era, Params};
use mcpx_server::{Call, Fault, Reply};

use super::admit::Admitted;
use crate::gateway::Gateway;
use crate::upstream::Upstream;

/// Whether `call` is bridged: a modern host, a legacy upstream.
pub(super) fn parks(call: &Call, facts: &ServerFacts) -> bool {
    call.host.era() == Era::Modern && facts.era == Era::Legacy
}

/// Runs `call` parked at its legacy upstream.
pub(super) async fn forward_parking(
    gw: &Arc<Gateway>,
    call: &Call,
    up: &Arc<Upstream>,
    admitted: Admitted<'_>,
    method: &str,
    params: &Params,
    idempotent: bool,
) -> Result<Reply, Fault> {
    let Admitted {
        conn, _in_flight, ..
    } = admitted;
    gw.forward_parking(call, up, conn, method, params, idempotent)
        .await
}
