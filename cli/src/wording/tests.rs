//! Every notice and hint through both spellings: a new variant fails to compile here
//! until it is given an arm, and the test until it has an example.

use bashc::protocol::{BackgroundWhy, SandboxProfile};

use super::*;

/// What each front end's words for a notice or hint must hold: the call it names in
/// that front end's spelling, when it names one.
struct Expect {
    cli: Option<&'static str>,
    mcp: Option<&'static str>,
}

const fn says(cli: &'static str, mcp: &'static str) -> Expect {
    Expect {
        cli: Some(cli),
        mcp: Some(mcp),
    }
}

const NEITHER: Expect = Expect {
    cli: None,
    mcp: None,
};

/// The notice variants `expect_notice` knows; the list below must hold each.
const NOTICE_VARIANTS: usize = 27;

/// One arm a variant, numbered: adding a notice fails to compile here until it is
/// given an arm, and the test until the list has an example of it.
fn expect_notice(notice: &Notice) -> (usize, Expect) {
    match notice {
        Notice::Background { .. } => (0, says("bashc wait j5", "bash_wait(job=\"j5\")")),
        Notice::TimedOut { .. } => (
            1,
            says("--on-timeout background", "on_timeout=\"background\""),
        ),
        Notice::Shutdown {} => (2, NEITHER),
        Notice::OwnersGone { .. } => (3, NEITHER),
        Notice::SessionEnded { .. } => (4, NEITHER),
        Notice::StragglersKilled {} => (5, NEITHER),
        Notice::SpillIncomplete { .. } => (6, NEITHER),
        Notice::SpillCapped { .. } => (7, NEITHER),
        Notice::LinesNotShown { .. } => (
            8,
            says(
                "bashc output j5 --stream stderr --offset 1 --limit 2",
                "bash_output(job=\"j5\", stream=\"stderr\", offset=1, limit=2)",
            ),
        ),
        Notice::NoNewOutput { .. } => (9, NEITHER),
        Notice::StillRunning { .. } => (10, says("bashc kill j5", "bash_kill(job=\"j5\")")),
        Notice::AlreadyEnded { .. } => (11, says("bashc output j5", "bash_output(job=\"j5\")")),
        Notice::Denied { .. } => (12, NEITHER),
        Notice::NotStarted { .. } => (13, NEITHER),
        Notice::LineCut { .. } => (14, says("--max-bytes", "max_bytes")),
        Notice::PageCapped { .. } => (15, NEITHER),
        Notice::OutputMissed { .. } => (
            16,
            says(
                "bashc output j5 --offset 4 --limit 3",
                "bash_output(job=\"j5\", offset=4, limit=3)",
            ),
        ),
        Notice::ConditionMet { .. } => (17, NEITHER),
        Notice::WaitingForInput { .. } => (18, says("bashc send j5", "bash_send(job=\"j5\"")),
        Notice::Lost { .. } => (19, says("bashc output j5", "bash_output(job=\"j5\")")),
        Notice::SandboxDenied { .. } => (20, says("--net on", "bash(net=\"on\")")),
        Notice::PageFull { .. } => (21, NEITHER),
        Notice::TerminalWanted {} => (22, says("--pty", "bash(pty=true)")),
        Notice::OutsideRoots { .. } => (23, says("bashc exec", "workdir inside")),
        Notice::NoWritableRoot { .. } => (24, says("cd there", "start the agent")),
        Notice::MemoryAsAddressSpace { .. } => (25, NEITHER),
        Notice::Asked { .. } => (26, says("bashc allow --ask a3", "bashc allow (ask a3)")),
    }
}

fn every_notice() -> Vec<Notice> {
    let job = JobId(5);
    let stream = StreamName::Stdout;
    let path = "/r/sessions/s/j5.stdout".to_owned();
    vec![
        Notice::Background {
            job,
            pid: 1,
            why: BackgroundWhy::Timeout,
            timeout_secs: Some(30),
        },
        Notice::TimedOut { after_secs: 30 },
        Notice::Shutdown {},
        Notice::OwnersGone {
            session: "s".to_owned(),
        },
        Notice::SessionEnded {
            session: "s".to_owned(),
        },
        Notice::StragglersKilled {},
        Notice::SpillIncomplete {
            stream,
            path: path.clone(),
            error: "disk full".to_owned(),
        },
        Notice::SpillCapped {
            stream,
            path: path.clone(),
            cap_bytes: 1 << 20,
            written_bytes: 1 << 20,
            total_bytes: 2 << 20,
        },
        Notice::LinesNotShown {
            job,
            stream: StreamName::Stderr,
            offset: 1,
            lines: 2,
        },
        Notice::NoNewOutput { job, ended: true },
        Notice::StillRunning {
            job,
            waited_ms: 1500,
        },
        Notice::AlreadyEnded { job },
        Notice::Denied {
            rule: "git-add-blind".to_owned(),
            message: "permission denied: git-add-blind: stage paths by name".to_owned(),
        },
        Notice::NotStarted {
            error: "no such directory".to_owned(),
        },
        Notice::LineCut {
            line: 3,
            page_bytes: 1000,
            path: Some(path.clone()),
        },
        Notice::PageCapped {
            last_line: 9,
            lost_lines: 4,
        },
        Notice::OutputMissed {
            job,
            stream,
            offset: 4,
            lines: 3,
            path: Some(path),
        },
        Notice::ConditionMet {
            job,
            met: WaitMet::Port {
                port: 80,
                pid: 9,
                published: None,
            },
        },
        Notice::WaitingForInput {
            job,
            idle_secs: 3,
            prompt: Some("Continue? [y/N]".to_owned()),
        },
        Notice::Lost {
            job,
            in_memory: vec![StreamName::Stderr],
        },
        Notice::SandboxDenied {
            profile: SandboxProfile::ReadOnly,
            network: Network::Off,
            denied: SandboxDenial::Network,
        },
        Notice::PageFull { max_bytes: 100 },
        Notice::TerminalWanted {},
        Notice::OutsideRoots {
            workdir: "/".to_owned(),
            roots: vec!["/home/me/project".to_owned()],
        },
        Notice::NoWritableRoot {
            directory: Some("/home/me".to_owned()),
        },
        Notice::MemoryAsAddressSpace { bytes: 512 << 20 },
        Notice::Asked {
            ask: bashc::protocol::AskId(3),
            kind: bashc::protocol::AskKind::Sandbox {
                profile: SandboxProfile::Off,
                network: Network::On,
            },
            command: "make deploy".to_owned(),
            expires_secs: 120,
        },
    ]
}

/// The hint variants `expect_hint` knows; the list below must hold each.
const HINT_VARIANTS: usize = 15;

/// As `expect_notice`, for hints.
fn expect_hint(hint: &ErrorHint) -> (usize, Expect) {
    match hint {
        ErrorHint::JobIds => (0, says("`bashc jobs`", "`bash_jobs()`")),
        ErrorHint::JobPids => (1, says("`bashc jobs`", "`bash_jobs()`")),
        ErrorHint::Sessions => (
            2,
            Expect {
                cli: Some("`bashc sessions`"),
                mcp: None,
            },
        ),
        ErrorHint::OtherSession { .. } => (3, says("--session s", "bash_jobs()")),
        ErrorHint::BadArgument { .. } => (4, says("--timeout: ", "bad argument `timeout_secs`: ")),
        ErrorHint::LooserSandbox { .. } => (
            5,
            says(
                "--sandbox off --net on",
                "bash(sandbox=\"off\", net=\"on\")",
            ),
        ),
        ErrorHint::NetworkOn => (6, says("without --net on", "without net=\"on\"")),
        ErrorHint::SameSandbox => (
            7,
            says("leave out --sandbox and --net", "leave out sandbox and net"),
        ),
        ErrorHint::ControllerMissing { .. } => (8, says("without --cpu", "without cpu")),
        ErrorHint::NeedsPty => (9, says("--pty", "bash(pty=true)")),
        ErrorHint::NeedsStdinPipe => (10, says("--stdin pipe", "bash(stdin=\"pipe\")")),
        ErrorHint::StdinClosed => (11, says("--eof", "eof=true")),
        ErrorHint::OutputKept { .. } => {
            (12, says("`bashc output j5`", "`bash_output(job=\"j5\")`"))
        }
        ErrorHint::NoSuchJob => (13, says("`bashc jobs`", "`bash_jobs()`")),
        ErrorHint::Ask { .. } => (14, says("bashc allow --refuse a3", "bashc allow (ask a3)")),
    }
}

fn every_hint() -> Vec<ErrorHint> {
    vec![
        ErrorHint::JobIds,
        ErrorHint::NoSuchJob,
        ErrorHint::JobPids,
        ErrorHint::Sessions,
        ErrorHint::OtherSession {
            session: "s".to_owned(),
        },
        ErrorHint::BadArgument {
            argument: Argument::Timeout,
        },
        ErrorHint::LooserSandbox {
            sandbox_off: true,
            network_on: true,
        },
        ErrorHint::NetworkOn,
        ErrorHint::SameSandbox,
        ErrorHint::ControllerMissing {
            argument: Argument::Cpu,
        },
        ErrorHint::NeedsPty,
        ErrorHint::NeedsStdinPipe,
        ErrorHint::StdinClosed,
        ErrorHint::OutputKept { job: JobId(5) },
        ErrorHint::Ask {
            ask: bashc::protocol::AskId(3),
            state: bashc::protocol::AskState::Pending,
        },
    ]
}

/// Words of the other front end: a CLI text has no tool call or argument, an MCP
/// text no `bashc` command or flag (but a shell program's own, `--yes`).
fn foreign(spelling: &str, text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let lower_at = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_lowercase);
    for (i, _) in text.char_indices() {
        let rest = &text[i..];
        let word_start = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        let found = match spelling {
            "cli" => {
                (word_start && (rest.starts_with("bash(") || rest.starts_with("bash_")))
                    || rest.starts_with("=\"")
                    || rest.starts_with("=true")
            }
            _ => {
                // `bashc allow` is the person's command, which the agent passes on
                // (issue 44): no tool answers an ask.
                (word_start
                    && rest.starts_with("bashc ")
                    && lower_at(i + 6)
                    && !rest.starts_with("bashc allow "))
                    || (word_start
                        && rest.starts_with("--")
                        && lower_at(i + 2)
                        && !rest.starts_with("--yes"))
            }
        };
        if found {
            return Some(rest.chars().take(20).collect());
        }
    }
    None
}

fn check(kind: &str, index: usize, expect: Expect, cli: String, mcp: String) {
    for (spelling, text, marker) in [("cli", &cli, expect.cli), ("mcp", &mcp, expect.mcp)] {
        if let Some(marker) = marker {
            assert!(
                text.contains(marker),
                "{kind} {index} in the {spelling} spelling lacks {marker:?}: {text}"
            );
        }
        if let Some(word) = foreign(spelling, text) {
            panic!("{kind} {index} in the {spelling} spelling says {word:?}: {text}");
        }
    }
}

/// Issue 31: every notice and every hint, through both spellings, comes out in that
/// front end's words and none of the other's.
#[test]
fn every_notice_and_hint_is_spelled_by_each_front_end_and_no_other() {
    let mut seen = std::collections::BTreeSet::new();
    for notice in every_notice() {
        let (index, expect) = expect_notice(&notice);
        seen.insert(index);
        let words = |spelling: &dyn Spelling| super::notice(&notice, spelling);
        check("notice", index, expect, words(&Cli), words(&Mcp));
    }
    assert_eq!(
        seen,
        (0..NOTICE_VARIANTS).collect(),
        "a notice without an example"
    );

    let mut seen = std::collections::BTreeSet::new();
    for hint in every_hint() {
        let (index, expect) = expect_hint(&hint);
        seen.insert(index);
        let words = |spelling: &dyn Spelling| error("refused", Some(&hint), spelling);
        check("hint", index, expect, words(&Cli), words(&Mcp));
    }
    assert_eq!(
        seen,
        (0..HINT_VARIANTS).collect(),
        "a hint without an example"
    );

    // Every argument has a name in each front end, the CLI's a flag.
    for argument in [
        Argument::Timeout,
        Argument::MaxLines,
        Argument::MaxBytes,
        Argument::Workdir,
        Argument::Cpu,
        Argument::Pids,
        Argument::Notify,
        Argument::NotifyIdle,
        Argument::Sandbox,
        Argument::Network,
        Argument::Until,
        Argument::Grep,
        Argument::Head,
        Argument::Tail,
    ] {
        assert!(Cli.argument(argument).starts_with("--"), "{argument:?}");
        assert!(!Mcp.argument(argument).contains('-'), "{argument:?}");
    }
}

/// Issue 31: a daemon's refusal of the network reads in the words of the front end
/// that asked.
#[test]
fn a_refused_network_is_told_in_the_askers_words() {
    let message = "the network is off for jobs here and may not be turned on: [sandbox] network = \"off\" with floor = \"read-only\" in bashd's config; set network = \"on\" there";
    let hint = ErrorHint::NetworkOn;
    assert_eq!(
        error(message, Some(&hint), &Cli),
        format!("{message}, or run the job without --net on")
    );
    assert_eq!(
        error(message, Some(&hint), &Mcp),
        format!("{message}, or run the job without net=\"on\"")
    );
}

/// An empty page's sentence is one for both front ends: the same words, but for the call
/// and the argument each names in its own spelling; one line is "1 line".
#[test]
fn an_empty_page_is_one_sentence_in_both_spellings() {
    let page = |stream, offset, total_lines, complete| OutputPage {
        job: JobId(7),
        stream,
        offset,
        lines: 0,
        text: String::new(),
        next_offset: None,
        total_lines,
        total_bytes: total_lines * 5,
        complete,
        full_output: None,
        notices: Vec::new(),
    };
    let empty = page(StreamName::Stdout, 1, 0, true);
    let other = page(StreamName::Stderr, 1, 1, true);
    assert_eq!(
        empty_page(&empty, Some(&other), &Cli).unwrap(),
        "j7's stdout is empty; its stderr has 1 line: bashc output j7 --stream stderr"
    );
    assert_eq!(
        empty_page(&empty, Some(&other), &Mcp).unwrap(),
        "j7's stdout is empty; its stderr has 1 line: bash_output(job=\"j7\", stream=\"stderr\")"
    );
    let past = page(StreamName::Stderr, 5, 1, true);
    assert_eq!(
        empty_page(&past, None, &Cli).unwrap(),
        "j7's stderr has 1 line; --offset 5 is past its end"
    );
    assert_eq!(
        empty_page(&past, None, &Mcp).unwrap(),
        "j7's stderr has 1 line; offset=5 is past its end"
    );
    let running = page(StreamName::Stdout, 1, 0, false);
    let quiet = page(StreamName::Stderr, 1, 0, false);
    for spelling in [&Cli as &dyn Spelling, &Mcp] {
        assert_eq!(
            empty_page(&running, Some(&quiet), spelling).unwrap(),
            "j7's stdout is empty so far (it is still running), and so is its stderr"
        );
    }
    let within = page(StreamName::Stdout, 2, 3, true);
    assert_eq!(empty_page(&within, None, &Cli), None);
}
