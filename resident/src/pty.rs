//! The resident's part in a terminal job (`exec --pty`): the daemon opened the
//! terminal and sent its slave as the job's stdin, stdout and stderr; the shell,
//! just forked, makes it its controlling terminal.

/// In the forked shell, before exec: leads a new session, the terminal on stdin
/// becomes its controlling terminal, and so the shell's process group (the job's)
/// is the terminal's foreground group, which gets C-c as SIGINT and SIGWINCH.
/// Async-signal-safe: two system calls.
///
/// # Safety
/// Call only in the child of a fork, before exec.
pub unsafe fn take_terminal() {
    // SAFETY: setsid, an ioctl on stdin and a write of a static message: no memory of
    // this process is handed over but that message.
    unsafe {
        // A forked child leads no group, so setsid cannot fail with EPERM.
        libc::setsid();
        if libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
            let message =
                b"bashd-resident: cannot make the job's terminal its controlling terminal\n";
            libc::write(2, message.as_ptr().cast(), message.len());
            libc::_exit(126);
        }
    }
}
