//! How each wrapper reads its options: which take a value, which are flags, and how
//! many words come between the options and the command it runs.

/// How a wrapper reads its options.
pub(super) struct Options {
    /// Short options that take a value: the rest of the word, or the next word.
    pub(super) short_values: &'static str,
    /// Short options that take a value only when it is attached (`xargs -i{}`).
    pub(super) short_optional: &'static str,
    pub(super) short_flags: &'static str,
    /// Long options that take the next word as their value (without `=`).
    pub(super) long_values: &'static [&'static str],
    pub(super) long_flags: &'static [&'static str],
    /// Whether `NAME=value` words come before the command (sudo, env).
    pub(super) assignments: bool,
    /// Words between the options and the command (timeout's duration).
    pub(super) positionals: usize,
    /// Whether every long option is a flag (its value only ever after `=`).
    pub(super) long_all_flags: bool,
}

pub(super) const NO_OPTIONS: Options = Options {
    short_values: "",
    short_optional: "",
    short_flags: "",
    long_values: &[],
    long_flags: &[],
    assignments: false,
    positionals: 0,
    long_all_flags: false,
};

pub(super) const SUDO: Options = Options {
    short_values: "ugCDhprtUTR",
    short_flags: "AbEeHiKklnPSsVvN",
    long_values: &[
        "user",
        "group",
        "close-from",
        "chdir",
        "host",
        "prompt",
        "role",
        "type",
        "other-user",
        "command-timeout",
        "chroot",
        "setenv",
        "property",
        "unit",
        "description",
        "slice",
        "nice",
    ],
    long_flags: &[
        "askpass",
        "background",
        "preserve-env",
        "edit",
        "set-home",
        "login",
        "remove-timestamp",
        "reset-timestamp",
        "non-interactive",
        "preserve-groups",
        "stdin",
        "shell",
        "validate",
        "list",
        "version",
        "help",
        "keep-cwd",
        "disable-internal-agent",
    ],
    assignments: true,
    ..NO_OPTIONS
};
pub(super) const ENV: Options = Options {
    short_values: "uCPS",
    short_flags: "i0v",
    long_values: &["unset", "chdir"],
    long_flags: &[
        "ignore-environment",
        "null",
        "debug",
        "list-signal-handling",
    ],
    assignments: true,
    ..NO_OPTIONS
};
pub(super) const EXEC: Options = Options {
    short_values: "a",
    short_flags: "cl",
    ..NO_OPTIONS
};
pub(super) const TIME: Options = Options {
    short_values: "fo",
    short_flags: "pavq",
    long_values: &["format", "output"],
    long_flags: &["portability", "append", "verbose", "quiet"],
    ..NO_OPTIONS
};
pub(super) const SETSID: Options = Options {
    short_flags: "cfw",
    long_flags: &["ctty", "fork", "wait"],
    ..NO_OPTIONS
};
pub(super) const CHRONIC: Options = Options {
    short_flags: "ev",
    ..NO_OPTIONS
};
pub(super) const NICE: Options = Options {
    short_values: "n",
    short_flags: "0123456789",
    long_values: &["adjustment"],
    ..NO_OPTIONS
};
pub(super) const IONICE: Options = Options {
    short_values: "cnpPu",
    short_flags: "t",
    long_values: &["class", "classdata", "pid", "pgid", "uid"],
    long_flags: &["ignore"],
    ..NO_OPTIONS
};
pub(super) const STDBUF: Options = Options {
    short_values: "ioe",
    long_values: &["input", "output", "error"],
    ..NO_OPTIONS
};
pub(super) const TIMEOUT: Options = Options {
    short_values: "sk",
    short_flags: "v",
    long_values: &["signal", "kill-after"],
    long_flags: &["foreground", "preserve-status", "verbose"],
    positionals: 1,
    ..NO_OPTIONS
};
pub(super) const CHRT: Options = Options {
    short_values: "TPD",
    short_flags: "abdefiorRv",
    long_values: &["sched-runtime", "sched-period", "sched-deadline"],
    long_flags: &[
        "all-tasks",
        "batch",
        "deadline",
        "ext",
        "fifo",
        "idle",
        "other",
        "rr",
        "reset-on-fork",
        "verbose",
    ],
    positionals: 1,
    ..NO_OPTIONS
};
pub(super) const TASKSET: Options = Options {
    short_flags: "ac",
    long_flags: &["all-tasks", "cpu-list"],
    positionals: 1,
    ..NO_OPTIONS
};
pub(super) const UNSHARE: Options = Options {
    short_values: "SGRwl",
    short_optional: "muinpUCT",
    short_flags: "frc",
    long_values: &[
        "setuid",
        "setgid",
        "root",
        "wd",
        "propagation",
        "setgroups",
        "map-user",
        "map-group",
        "map-users",
        "map-groups",
        "load-interp",
    ],
    long_flags: &[
        "fork",
        "map-root-user",
        "map-current-user",
        "kill-child",
        "mount-proc",
        "keep-caps",
        "mount",
        "uts",
        "ipc",
        "net",
        "pid",
        "user",
        "cgroup",
        "time",
        "mount-binfmt",
        "map-auto",
    ],
    ..NO_OPTIONS
};
pub(super) const NSENTER: Options = Options {
    short_values: "tSGrwW",
    short_optional: "muinpUCT",
    short_flags: "aFZ",
    long_values: &["target", "setuid", "setgid", "root", "wd", "env"],
    long_flags: &["all", "no-fork", "preserve-credentials", "follow-context"],
    ..NO_OPTIONS
};
pub(super) const STRACE: Options = Options {
    short_values: "eoOpPsSuEaXbIUnAlLx",
    short_flags: "cCdDfFhiqrtTvVwyzZk",
    long_values: &[
        "trace",
        "output",
        "attach",
        "string-limit",
        "user",
        "env",
        "signal",
        "status",
        "summary-sort-by",
        "trace-path",
        "decode-fds",
    ],
    ..NO_OPTIONS
};
pub(super) const CGEXEC: Options = Options {
    short_values: "g",
    long_flags: &["sticky"],
    ..NO_OPTIONS
};
pub(super) const FIREJAIL: Options = Options {
    long_all_flags: true,
    ..NO_OPTIONS
};
pub(super) const FAKEROOT: Options = Options {
    short_values: "lsib",
    short_flags: "uvh",
    long_values: &["lib", "faked"],
    long_flags: &["unknown-is-real", "version", "help"],
    ..NO_OPTIONS
};
pub(super) const CHROOT: Options = Options {
    long_values: &["userspec", "groups"],
    long_flags: &["skip-chdir"],
    positionals: 1,
    ..NO_OPTIONS
};
pub(super) const INIT: Options = Options {
    short_values: "rpe",
    short_flags: "cvsglwh",
    long_values: &["rewrite"],
    long_flags: &["single-child", "verbose", "help", "version"],
    ..NO_OPTIONS
};
pub(super) const SETPRIV: Options = Options {
    short_flags: "d",
    long_values: &[
        "ruid",
        "euid",
        "rgid",
        "egid",
        "reuid",
        "regid",
        "groups",
        "inh-caps",
        "ambient-caps",
        "bounding-set",
        "securebits",
        "selinux-label",
        "apparmor-profile",
        "landlock-access",
        "landlock-rule",
        "pdeathsig",
    ],
    long_flags: &[
        "dump",
        "nnp",
        "no-new-privs",
        "clear-groups",
        "keep-groups",
        "init-groups",
        "reset-env",
    ],
    ..NO_OPTIONS
};
pub(super) const PRLIMIT: Options = Options {
    short_values: "p",
    short_optional: "ACDEFilmnqrstuvxyeo",
    long_values: &["pid", "output"],
    long_flags: &["noheadings", "raw", "verbose"],
    ..NO_OPTIONS
};
pub(super) const PROXY: Options = Options {
    short_values: "fuap",
    short_flags: "qi",
    ..NO_OPTIONS
};
pub(super) const SYSTEMD_RUN: Options = Options {
    short_values: "pEuMH",
    short_flags: "GdtPqrS",
    long_values: &[
        "property",
        "setenv",
        "unit",
        "machine",
        "host",
        "slice",
        "description",
        "uid",
        "gid",
        "nice",
        "working-directory",
        "service-type",
        "on-active",
        "on-boot",
        "on-startup",
        "on-unit-active",
        "on-unit-inactive",
        "on-calendar",
        "on-timezone-change",
        "on-clock-change",
        "timer-property",
        "path-property",
        "socket-property",
        "expand-environment",
    ],
    long_flags: &[
        "user",
        "system",
        "scope",
        "wait",
        "no-block",
        "pty",
        "pipe",
        "quiet",
        "collect",
        "remain-after-exit",
        "send-sighup",
        "same-dir",
        "shell",
        "no-ask-password",
    ],
    ..NO_OPTIONS
};
pub(super) const XARGS: Options = Options {
    short_values: "ILnPsdEa",
    short_optional: "ile",
    short_flags: "0prtox",
    long_values: &[
        "max-args",
        "max-procs",
        "delimiter",
        "arg-file",
        "max-chars",
        "process-slot-var",
    ],
    long_flags: &[
        "null",
        "interactive",
        "verbose",
        "no-run-if-empty",
        "exit",
        "open-tty",
        "show-limits",
        "max-lines",
        "replace",
        "eof",
    ],
    ..NO_OPTIONS
};
pub(super) const FLOCK: Options = Options {
    short_values: "wE",
    short_flags: "sxnuoFeh",
    long_values: &["timeout", "wait", "conflict-exit-code"],
    long_flags: &[
        "shared",
        "exclusive",
        "nonblock",
        "nb",
        "unlock",
        "close",
        "no-fork",
        "verbose",
    ],
    ..NO_OPTIONS
};
pub(super) const WATCH: Options = Options {
    short_values: "nq",
    short_optional: "d",
    short_flags: "gtbecwpx",
    long_values: &["interval", "equexit"],
    long_flags: &[
        "chgexit",
        "no-title",
        "beep",
        "errexit",
        "color",
        "no-color",
        "no-wrap",
        "precise",
        "exec",
        "no-rerun",
        "differences",
    ],
    ..NO_OPTIONS
};
pub(super) const PARALLEL: Options = Options {
    short_values: "jSaIdEnNX",
    short_flags: "0kquvrtmX",
    long_values: &[
        "jobs",
        "sshlogin",
        "arg-file",
        "colsep",
        "delimiter",
        "results",
        "joblog",
        "tmpdir",
        "workdir",
        "timeout",
        "max-args",
        "max-replace-args",
        "eof",
        "replace",
        "basefile",
        "return",
        "load",
        "memfree",
        "delay",
        "retries",
        "halt",
    ],
    long_flags: &[
        "null",
        "keep-order",
        "quote",
        "ungroup",
        "verbose",
        "dry-run",
        "no-run-if-empty",
        "pipe",
        "tag",
        "line-buffer",
        "group",
        "bar",
        "progress",
        "eta",
        "xargs",
        "lb",
    ],
    ..NO_OPTIONS
};
pub(super) const RUNUSER: Options = Options {
    short_values: "ugGsw",
    short_flags: "lmpfP",
    long_values: &[
        "user",
        "group",
        "supp-group",
        "shell",
        "whitelist-environment",
    ],
    long_flags: &["login", "preserve-environment", "pty", "fast"],
    ..NO_OPTIONS
};
pub(super) const ENTR: Options = Options {
    short_flags: "acdnprsz",
    ..NO_OPTIONS
};

pub(super) const SHELLS: &[&str] = &[
    "bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "fish", "tcsh", "csh", "yash", "posh",
    "hush", "oksh", "loksh", "lksh", "pdksh", "rbash", "bosh",
];
