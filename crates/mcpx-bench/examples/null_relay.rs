//! The floor of any stdio gateway: a relay that copies bytes between its own stdio and
//! a child's, with two blocking threads and no parsing at all. `scripts/bench.sh` runs
//! it as the "relay floor" row: what one extra process hop costs on this machine,
//! before any MCP work is done.
//!
//! Usage: `null_relay CMD [ARGS...]`.

use std::io::{Read, Write};
use std::process::{Command, ExitCode, Stdio};

fn pump(mut from: impl Read, mut to: impl Write) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).and_then(|()| to.flush()).is_err() {
                    return;
                }
            }
        }
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(program) = args.next() else {
        eprintln!("usage: null_relay CMD [ARGS...]");
        return ExitCode::from(2);
    };
    let mut child = match Command::new(&program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            eprintln!("null_relay: cannot start {program}: {e}");
            return ExitCode::from(1);
        }
    };
    let (Some(child_in), Some(child_out)) = (child.stdin.take(), child.stdout.take()) else {
        return ExitCode::from(1);
    };
    // Host → child on a thread of its own; closing our stdin closes the child's.
    std::thread::spawn(move || pump(std::io::stdin().lock(), child_in));
    pump(child_out, std::io::stdout().lock());
    let _ = child.wait();
    ExitCode::SUCCESS
}
