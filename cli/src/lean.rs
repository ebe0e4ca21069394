//! The lean path (issue 46): the short commands an agent or a script runs one after
//! another (`exec` but `--stream`, `check`, `kill`, `jobs`) on this machine's bashd go
//! through the library's blocking client, and bashc starts no async runtime for them
//! (no thread, no epoll, no timer, none of their teardown). Each command's request and
//! printing are its async twin's, in the command's own module; another host, a stream
//! of output and every other command take the async path in `main`.

use bashc::Target;

use crate::{Command, jobs};

/// Runs `command` on the lean path and answers its exit status, or hands it back when
/// it takes the async path.
pub fn run(command: Command, target: &Target) -> Result<anyhow::Result<u8>, Box<Command>> {
    if target.host().is_some() {
        return Err(Box::new(command));
    }
    Ok(match command {
        Command::Exec(crate::Deferred(args)) if !args.stream => crate::exec_blocking(args, target),
        Command::Check(crate::Deferred(args)) => jobs::check_blocking(args, target),
        Command::Kill(crate::Deferred(args)) => jobs::kill_blocking(args, target),
        Command::Jobs(crate::Deferred(args)) => jobs::jobs_blocking(args, target),
        command => return Err(Box::new(command)),
    })
}
