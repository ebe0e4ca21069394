//! The daemon's life: its runtime dir rules, the one-daemon lock, the socket, start on
//! demand, and a clean stop on SIGTERM.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Stdio;
use std::time::Duration;

use bashc::protocol::runtime;
use bashd_tests::{Daemon, alive, wait_for_running, wait_until};

use crate::{json, show, stderr, stdout};

#[test]
fn the_runtime_dir_and_socket_are_private() {
    let daemon = Daemon::start();
    let dir_mode = std::fs::metadata(daemon.runtime_dir()).unwrap().mode() & 0o7777;
    assert_eq!(dir_mode, 0o700);
    let socket_mode = std::fs::metadata(daemon.socket_path()).unwrap().mode() & 0o7777;
    assert_eq!(socket_mode, 0o600);
    let lock = std::fs::read_to_string(runtime::lock_path(daemon.runtime_dir())).unwrap();
    assert_eq!(lock.trim(), daemon.pid().to_string());
}

#[test]
fn a_runtime_dir_that_is_unsafe_is_refused_with_the_fix() {
    let daemon = Daemon::unstarted();
    let real = daemon.scratch().join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&real, daemon.runtime_dir()).unwrap();
    let out = daemon.bashd_command().output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let message = stderr(&out);
    assert!(
        message.contains(&daemon.runtime_dir().display().to_string())
            && message.contains("symlink"),
        "{message}"
    );

    std::fs::remove_file(daemon.runtime_dir()).unwrap();
    std::fs::create_dir(daemon.runtime_dir()).unwrap();
    std::fs::set_permissions(daemon.runtime_dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = daemon.bashd_command().output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(stderr(&out).contains("chmod 700"), "{}", show(&out));

    // A directory of another user (the tests may run as root, who can make one).
    std::fs::set_permissions(daemon.runtime_dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let nobody = 65534;
    if rustix::process::getuid().is_root()
        && std::os::unix::fs::chown(daemon.runtime_dir(), Some(nobody), Some(nobody)).is_ok()
    {
        let out = daemon.bashd_command().output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", show(&out));
        assert!(
            stderr(&out).contains("belongs to uid 65534"),
            "{}",
            show(&out)
        );
    }
}

#[test]
fn a_second_daemon_exits_naming_the_live_one() {
    let daemon = Daemon::start();
    let out = daemon.bashd_command().output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stderr(&out).contains(&format!(
            "another bashd (pid {}) is already running",
            daemon.pid()
        )),
        "{}",
        show(&out)
    );
    // The first one is untouched.
    assert!(alive(daemon.pid()));
    let out = daemon.run_bashc(&["exec", "--", "echo still"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}

#[test]
fn a_stale_socket_file_is_replaced() {
    let daemon = Daemon::unstarted();
    runtime::ensure_runtime_dir(daemon.runtime_dir()).unwrap();
    // A socket file whose listener is gone, as a crashed daemon leaves it.
    drop(std::os::unix::net::UnixListener::bind(daemon.socket_path()).unwrap());
    assert!(daemon.socket_path().exists());
    let daemon = daemon.spawn_and_wait();
    let out = daemon.run_bashc(&["exec", "--", "echo replaced"]);
    assert!(stdout(&out).contains("replaced"), "{}", show(&out));
}

#[test]
fn without_autostart_an_absent_daemon_is_exit_255_with_how_to_start_it() {
    let daemon = Daemon::unstarted();
    let out = daemon.run_bashc(&["exec", "--", "true"]);
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    let message = stderr(&out);
    assert!(
        message.starts_with("bashc: ")
            && message.contains("BASHD_NO_AUTOSTART")
            && message.contains("start it"),
        "{message}"
    );
    assert!(daemon.daemons().is_empty());
}

#[test]
fn forty_clients_against_no_daemon_start_exactly_one() {
    let daemon = Daemon::unstarted();
    let children: Vec<_> = (0..40)
        .map(|i| {
            daemon
                .bashc()
                .env_remove("BASHD_NO_AUTOSTART")
                .args(["exec", "--json", "--", &format!("echo auto-{i}")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        assert_eq!(json(&out)["stdout"]["text"], format!("auto-{i}\n"));
    }
    let daemons = daemon.daemons();
    assert_eq!(
        daemons.len(),
        1,
        "daemons serving the runtime dir: {daemons:?}"
    );
    // The one daemon is the one holding the lock.
    let lock = std::fs::read_to_string(runtime::lock_path(daemon.runtime_dir())).unwrap();
    assert_eq!(lock.trim(), daemons[0].to_string());
}

#[test]
fn sigterm_stops_jobs_answers_their_clients_and_exits_0_leaving_nothing() {
    let mut daemon = Daemon::start();
    let client = daemon
        .bashc()
        .args([
            "exec",
            "--json",
            "--timeout",
            "600",
            "--",
            "sleep 305.404; echo never",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let sleeps = wait_for_running("sleep 305.404");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon.pid() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status = daemon.child_mut().wait().unwrap();
    assert_eq!(status.code(), Some(0));

    let out = client.wait_with_output().unwrap();
    let result = json(&out);
    assert_eq!(result["state"], "killed", "{}", show(&out));
    assert!(
        result["notice"].as_str().unwrap().contains("shutting down"),
        "{result}"
    );
    assert!(
        sleeps.iter().all(|&p| !alive(p)),
        "job processes alive: {sleeps:?}"
    );
    assert!(!daemon.socket_path().exists(), "the socket is left");
    assert!(
        !runtime::lock_path(daemon.runtime_dir()).exists(),
        "the lock file is left"
    );
}

#[test]
fn status_names_the_daemon() {
    let daemon = Daemon::start();
    let out = daemon.run_bashc(&["status", "--json"]);
    let status = json(&out);
    assert_eq!(status["daemon_pid"], daemon.pid());
    assert_eq!(
        status["runtime_dir"],
        daemon.runtime_dir().display().to_string()
    );
    assert_eq!(status["running_jobs"], 0);
    let out = daemon.run_bashc(&["status"]);
    assert!(
        stdout(&out).contains(&format!("pid {}", daemon.pid())),
        "{}",
        show(&out)
    );
}

/// An agent waits for EOF on the pipes it gave its bash tool; a daemon started by
/// `bashc` must not hold one open after `bashc` has exited.
#[test]
fn an_autostarted_daemon_does_not_keep_the_agents_pipes_open() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;

    let daemon = Daemon::unstarted();
    let (read_end, write_end) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let write_fd = write_end.as_raw_fd();
    let mut command = daemon.bashc();
    command
        .env_remove("BASHD_NO_AUTOSTART")
        .args(["exec", "--", "true"]);
    // SAFETY: dup2 is async-signal-safe; it gives only this child the pipe as fd 3,
    // without the close-on-exec flag, as an agent's runtime might.
    unsafe {
        command.pre_exec(move || {
            if libc::dup2(write_fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = command.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(daemon.daemons().len(), 1, "no daemon was started");
    drop(write_end);

    rustix::io::ioctl_fionbio(&read_end, true).unwrap();
    let mut reader = std::fs::File::from(read_end);
    let eof = wait_until(Duration::from_secs(5), || {
        matches!(reader.read(&mut [0u8; 16]), Ok(0))
    });
    assert!(eof, "the daemon holds the pipe bashc inherited as fd 3");
}

#[test]
fn a_config_file_sets_the_limits_of_jobs() {
    let daemon =
        Daemon::start_with_config("[limits]\nmax_lines = 3\n\n[env]\nFROM_CONFIG = \"yes\"\n");
    let out = daemon.run_bashc(&["exec", "--json", "--", "seq 1 10; echo $FROM_CONFIG"]);
    let result = json(&out);
    assert_eq!(result["stdout"]["text"], "9\n10\nyes\n", "{result}");
    assert_eq!(result["stdout"]["total_lines"], 11);
}

#[test]
fn a_config_with_an_unknown_key_stops_the_daemon_from_starting() {
    let daemon = Daemon::unstarted();
    daemon.write_config("[limits]\nmax_lines = 3\nmax_lnes = 4\n");
    let config = daemon.config_home().join("bashd/config.toml");
    let expected = format!("{}:3: unknown key limits.max_lnes", config.display());

    let out = daemon.bashd_command().output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(stderr(&out).contains(&expected), "{}", show(&out));
    assert!(!daemon.socket_path().exists());

    let out = daemon
        .bashd_command()
        .arg("--check-config")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(stderr(&out).contains(&expected), "{}", show(&out));
}

/// Under a user systemd instance, `bashc` starts the daemon in a delegated scope
/// (`systemd-run --user --scope -p Delegate=yes`), where it can make a cgroup per job;
/// where systemd-run cannot make one, it starts the daemon directly and says why in
/// the daemon's log. A stand-in `systemd-run` on PATH plays systemd here.
#[test]
fn autostart_asks_systemd_for_a_delegated_scope_and_does_without_one() {
    use std::os::unix::fs::PermissionsExt;

    for works in [true, false] {
        let daemon = Daemon::unstarted();
        let fake = daemon.scratch().join("fake-systemd");
        std::fs::create_dir_all(fake.join("bin")).unwrap();
        std::fs::create_dir_all(fake.join("systemd")).unwrap();
        std::fs::write(fake.join("systemd/private"), "").unwrap();
        let args = fake.join("args");
        let script = if works {
            format!(
                "#!/bin/sh\necho \"$@\" > {}\nwhile [ $# -gt 0 ] && [ \"$1\" != -- ]; do shift; done\nshift\nexec \"$@\"\n",
                args.display()
            )
        } else {
            "#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n".to_owned()
        };
        let systemd_run = fake.join("bin/systemd-run");
        std::fs::write(&systemd_run, script).unwrap();
        std::fs::set_permissions(&systemd_run, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Run once here, until it is no longer "Text file busy" (another test thread's
        // child may hold the write end it was just written through); bashc would take
        // that for systemd-run failing.
        bashd_tests::output_of_new_file(
            std::process::Command::new(&systemd_run).args(["--", "true"]),
        );
        let path = format!(
            "{}:{}",
            fake.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );

        let out = daemon
            .bashc()
            .env_remove("BASHD_NO_AUTOSTART")
            .env("XDG_RUNTIME_DIR", &fake)
            .env("PATH", path)
            .args(["exec", "--", "echo started"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        assert!(stdout(&out).contains("started"), "{}", show(&out));
        assert_eq!(
            daemon.daemons().len(),
            1,
            "no daemon serves the runtime dir"
        );
        if works {
            let args = std::fs::read_to_string(&args).unwrap();
            assert!(
                args.starts_with("--user --scope ") && args.contains("--property=Delegate=yes"),
                "{args}"
            );
            assert!(args.trim_end().ends_with("/bashd"), "{args}");
        } else {
            let log = std::fs::read_to_string(runtime::log_path(daemon.runtime_dir())).unwrap();
            assert!(
                log.contains("could not start bashd in a delegated systemd scope"),
                "{log}"
            );
        }
    }
}
