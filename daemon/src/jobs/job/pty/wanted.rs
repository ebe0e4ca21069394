//! Whether a job on pipes failed because its program wanted a terminal, read from the
//! output it showed, as the sandbox's refusal notice is (`sandbox::refusal`): the
//! kernel does not tell bashd why a program gave up, but the programs that need a
//! terminal say so in few enough words.

use bashd_protocol::{ExecResult, JobState, Notice};

/// What programs print when they need a terminal and have none, lowercased: `tty`,
/// `stty`, vim, ssh and docker (`not a terminal`, `not from a terminal`, `not a tty`), sudo (`no tty present`, `a
/// terminal is required`), gpg and stty (`inappropriate ioctl for device`), less and
/// others (`cannot open /dev/tty`).
const SAYS: &[&str] = &[
    "not a terminal",
    "not from a terminal",
    "not a tty",
    "no tty present",
    "a terminal is required",
    "inappropriate ioctl for device",
    "cannot open /dev/tty",
    "can't open /dev/tty",
    "could not open /dev/tty",
];

/// Opening `/dev/tty` without a controlling terminal fails with ENXIO; a line that
/// names both is a program that asked for one (`bash: /dev/tty: No such device or
/// address`, Python's `[Errno 6] No such device or address: '/dev/tty'`).
const NO_TTY_ERROR: &str = "no such device or address";

/// The notice that a job's program wanted a terminal: for a job on pipes (`on_pipes`)
/// whose output says so and that failed, or has not ended (vim on a stdin pipe warns
/// and then waits, until its timeout), or was ended; none for a success.
pub fn terminal_wanted(result: &ExecResult, on_pipes: bool) -> Option<Notice> {
    let unfinished = match result.state {
        JobState::Exited => result.exit_code != Some(0),
        JobState::Running | JobState::TimedOut | JobState::Killed | JobState::Signaled => true,
        JobState::Denied | JobState::Failed | JobState::Lost => false,
    };
    if !on_pipes || !unfinished {
        return None;
    }
    let says = |text: &str| {
        text.lines().any(|line| {
            let line = line.to_lowercase();
            SAYS.iter().any(|needle| line.contains(needle))
                || (line.contains("/dev/tty") && line.contains(NO_TTY_ERROR))
        })
    };
    [Some(&result.stdout), result.stderr.as_ref()]
        .into_iter()
        .flatten()
        .any(|stream| says(&stream.text))
        .then_some(Notice::TerminalWanted {})
}

#[cfg(test)]
mod tests {
    use super::*;
    use bashd_protocol::{JobId, StreamResult};

    fn result(exit: i32, stderr: &str) -> ExecResult {
        let mut stream = StreamResult::empty();
        stream.text = stderr.to_owned();
        ExecResult {
            job: JobId(1),
            session: "s".into(),
            pid: Some(1),
            state: JobState::Exited,
            exit_code: Some(exit),
            signal: None,
            duration_ms: 1,
            backgrounded: false,
            description: None,
            workdir: "/".into(),
            stdout: StreamResult::empty(),
            stderr: Some(stream),
            notices: Vec::new(),
            record: None,
            sandbox: None,
            screen: None,
        }
    }

    #[test]
    fn failures_that_ask_for_a_terminal_get_the_notice() {
        for said in [
            "OSError: [Errno 6] No such device or address: '/dev/tty'\n",
            "bash: /dev/tty: No such device or address\n",
            "sudo: no tty present and no askpass program specified\n",
            "sudo: a terminal is required to read the password\n",
            "stty: 'standard input': Inappropriate ioctl for device\n",
            "the input device is not a TTY\n",
            "not a tty\n",
            "Vim: Warning: Input is not from a terminal\n",
        ] {
            assert_eq!(
                terminal_wanted(&result(1, said), true),
                Some(Notice::TerminalWanted {}),
                "{said}"
            );
        }
    }

    /// Issue 34: vim on a stdin pipe warns and then waits: a job still running, or
    /// ended at its timeout, that said so gets the notice too.
    #[test]
    fn a_job_still_running_that_said_it_wants_a_terminal_gets_it() {
        for state in [JobState::Running, JobState::TimedOut] {
            let mut running = result(0, "Vim: Warning: Input is not from a terminal\n");
            running.state = state;
            running.exit_code = None;
            assert_eq!(
                terminal_wanted(&running, true),
                Some(Notice::TerminalWanted {}),
                "{state:?}"
            );
        }
    }

    #[test]
    fn success_terminal_jobs_and_other_failures_get_none() {
        let said = "stty: 'standard input': Inappropriate ioctl for device\n";
        assert_eq!(terminal_wanted(&result(0, said), true), None);
        assert_eq!(terminal_wanted(&result(1, said), false), None);
        assert_eq!(
            terminal_wanted(&result(1, "cat: /dev/ttyS0: Permission denied\n"), true),
            None
        );
        assert_eq!(
            terminal_wanted(&result(2, "No such device or address: /dev/sdz\n"), true),
            None
        );
    }
}
