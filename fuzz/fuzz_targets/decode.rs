//! Any bytes: `decode_bytes` answers without panicking, accepted frames round-trip,
//! and every error converts to a response that decodes again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpx_protocol::Revision;
use mcpx_protocol::codec::{self, Decoded, Limits};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    match codec::decode_bytes(data.to_vec(), &limits) {
        Ok(Decoded::Single(f)) => assert_eq!(f.as_str().as_bytes(), data),
        Ok(batch @ Decoded::Batch(_)) => {
            for rev in Revision::ALL {
                let _ = codec::admit(batch.clone(), rev);
            }
        }
        Err(e) => {
            let again = codec::decode(e.to_response().into_string(), &limits);
            assert!(again.is_ok());
        }
    }
});
