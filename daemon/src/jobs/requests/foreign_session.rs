//! Refuses a confined job whose workdir is another session's directory
//! (`R/sessions/<other>/`, its temp dir above all), with what the directory is and why
//! it cannot be used (issue 42). The sandbox hides every other session's directory from
//! a job that confines files, so without this check the job's resident could not enter
//! its workdir, and the request got "bashd-resident exited before it started the
//! shell". `exec.rs` asks it once the sandbox in force is known.

use std::path::Path;

use bashd_protocol::{
    Argument, ErrorHint, ErrorKind, ErrorReply, SandboxInForce, SandboxProfile, runtime,
};

/// `Err` when a job of `session` that confines files (`sandbox`) would run in another
/// session's directory under `runtime_dir`. An unconfined job may (it sees every
/// directory of its user); a job's own session directory and temp dir are its own.
pub(in crate::jobs) fn refuse_other_sessions_dir(
    runtime_dir: &Path,
    session: &str,
    workdir: &Path,
    sandbox: Option<SandboxInForce>,
) -> Result<(), ErrorReply> {
    if sandbox.is_none_or(|in_force| in_force.profile == SandboxProfile::Off) {
        return Ok(());
    }
    // Both resolved: a workdir reached through a symlink or `..` is the same directory.
    let sessions = runtime::sessions_dir(runtime_dir);
    let (Ok(sessions), Ok(workdir)) = (sessions.canonicalize(), workdir.canonicalize()) else {
        return Ok(());
    };
    let Some(other) = workdir
        .strip_prefix(&sessions)
        .ok()
        .and_then(|rest| rest.components().next())
        .map(|name| name.as_os_str().to_string_lossy().into_owned())
    else {
        return Ok(());
    };
    if other == session {
        return Ok(());
    }
    let what = if workdir == sessions.join(&other).join("tmp") {
        format!("the temp dir ($TMPDIR) of session {other}")
    } else {
        format!(
            "in the directory of session {other} ({})",
            sessions.join(&other).display()
        )
    };
    Err(ErrorReply::new(
        ErrorKind::InvalidRequest,
        format!(
            "working directory {} is {what}, which holds that session's temp files and output: a sandboxed job sees only its own session's, so a job of session {session} cannot run there; use a directory of your own (this session's $TMPDIR, or a project directory), or run the job in session {other}",
            workdir.display()
        ),
    )
    .with_hint(ErrorHint::BadArgument {
        argument: Argument::Workdir,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bashd_protocol::Network;

    fn confined(profile: SandboxProfile) -> Option<SandboxInForce> {
        Some(SandboxInForce {
            profile,
            network: Network::Off,
        })
    }

    #[test]
    fn another_sessions_dir_is_refused_to_a_confined_job_only() {
        let runtime = tempfile::tempdir().unwrap();
        let other_tmp = runtime::sessions_dir(runtime.path()).join("a").join("tmp");
        std::fs::create_dir_all(other_tmp.join("sub")).unwrap();
        std::fs::create_dir_all(runtime::sessions_dir(runtime.path()).join("b/tmp")).unwrap();
        let check = |session: &str, dir: &Path, sandbox| {
            refuse_other_sessions_dir(runtime.path(), session, dir, sandbox)
        };
        let error = check("b", &other_tmp, confined(SandboxProfile::ReadOnly)).unwrap_err();
        assert!(
            error
                .message
                .contains("the temp dir ($TMPDIR) of session a")
                && error
                    .message
                    .contains("a job of session b cannot run there"),
            "{}",
            error.message
        );
        let below = other_tmp.join("sub/../sub");
        let error = check("b", &below, confined(SandboxProfile::WorkspaceWrite)).unwrap_err();
        assert!(
            error.message.contains("in the directory of session a"),
            "{}",
            error.message
        );
        // Its own session's, an unconfined job, and the runtime dir itself are not.
        assert!(check("a", &other_tmp, confined(SandboxProfile::ReadOnly)).is_ok());
        assert!(check("b", &other_tmp, None).is_ok());
        assert!(check("b", &other_tmp, confined(SandboxProfile::Off)).is_ok());
        assert!(check("b", runtime.path(), confined(SandboxProfile::ReadOnly)).is_ok());
    }
}
