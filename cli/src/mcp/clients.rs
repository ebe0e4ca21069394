//! What `bashc mcp` knows of the agent programs that call it (issue 34), by the name
//! each gives in `initialize` (`clientInfo.name`): how much of a tool result each shows
//! its model whole, and which variables carry its own credentials.
//!
//! Every client cuts a long result blindly, and each somewhere else: Claude Code saves
//! a successful result over 50,000 characters to a file and shows a 2 KB preview, and
//! cuts an error to about 10 KB; OpenCode cuts at 2,000 lines or about 50 KiB; Codex
//! keeps about 12 KB, cut in the middle; Gemini CLI keeps 8,000 + 32,000 characters.
//! So the server asks the daemon for no more than the client shows, and cuts the rest
//! itself, on lines, saying what it left out (`fit`). A client named in the config's
//! `[mcp.clients."NAME"]` gets the budget written there.

use bashc::protocol::config::{ClientBudget, ConfigFile, Whole};
use bashc::protocol::{Direction, ExecResult, Notice, StreamName, StreamResult, TruncatedBy};

/// How much of one tool result a client shows its model whole: its lines, and its
/// bytes when it succeeds and when it is an error. Bytes, not characters: a string
/// of N bytes of UTF-8 is at most N characters (or UTF-16 units) long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub result_lines: u64,
    pub result_bytes: u64,
    pub error_result_bytes: u64,
}

/// What a result holds besides its streams (the status line, notices, the hints under
/// cut streams, the exit record), kept free of the streams' share of a budget.
const RESERVE_BYTES: u64 = 2_048;
const RESERVE_LINES: u64 = 40;

impl Budget {
    /// The most lines of one stream worth asking the daemon for.
    pub fn stream_lines(&self) -> u32 {
        self.result_lines
            .saturating_sub(RESERVE_LINES)
            .clamp(1, u64::from(u32::MAX)) as u32
    }

    /// The most bytes of one stream worth asking the daemon for: a result with one
    /// stream then fits as it comes, one with two is cut by [`fit`].
    pub fn stream_bytes(&self) -> u32 {
        self.result_bytes
            .saturating_sub(RESERVE_BYTES)
            .clamp(1, u64::from(u32::MAX)) as u32
    }
}

/// A client this server knows: the start of its `clientInfo.name`, what it shows whole
/// (measured with each program: README, "Agent programs"), and the variables through
/// which it reaches its model.
struct Known {
    name: &'static str,
    budget: Budget,
    credentials: &'static [&'static str],
}

const ANTHROPIC: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
];
const OPENAI: &[&str] = &["OPENAI_API_KEY", "CODEX_API_KEY"];
const GOOGLE: &[&str] = &["GEMINI_API_KEY", "GOOGLE_API_KEY"];

/// Every provider's: the credentials kept from jobs when the client is not known, or
/// is one (OpenCode) that may use any of them.
pub const ALL_CREDENTIALS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GENERATIVE_AI_API_KEY",
    "OPENROUTER_API_KEY",
    "OPENCODE_API_KEY",
];

const KNOWN: &[Known] = &[
    // A success over 50,000 characters goes to a file (2 KB preview); an error is cut
    // to about 10 KB.
    Known {
        name: "claude-code",
        budget: Budget {
            result_lines: 4_000,
            result_bytes: 45_000,
            error_result_bytes: 9_000,
        },
        credentials: ANTHROPIC,
    },
    // About 12 KB, cut in the middle, success or error.
    Known {
        name: "codex-mcp-client",
        budget: Budget {
            result_lines: 4_000,
            result_bytes: 10_000,
            error_result_bytes: 10_000,
        },
        credentials: OPENAI,
    },
    // The first 8,000 and the last 32,000 characters.
    Known {
        name: "gemini-cli-mcp-client",
        budget: Budget {
            result_lines: 4_000,
            result_bytes: 36_000,
            error_result_bytes: 36_000,
        },
        credentials: GOOGLE,
    },
    // Cut at the end past 2,000 lines or about 50 KiB.
    Known {
        name: "opencode",
        budget: Budget {
            result_lines: 1_900,
            result_bytes: 45_000,
            error_result_bytes: 45_000,
        },
        credentials: ALL_CREDENTIALS,
    },
];

/// The budget of a client named in the config but not known here: what the daemon
/// shows by default, both streams whole.
const CONFIGURED_DEFAULT: Budget = Budget {
    result_lines: 2 * 2_000 + RESERVE_LINES,
    result_bytes: 2 * 51_200 + RESERVE_BYTES,
    error_result_bytes: 2 * 51_200 + RESERVE_BYTES,
};

/// What the config file says to `bashc mcp`: budgets by client name
/// (`[mcp.clients."NAME"]`) and the credentials to pass into jobs all the same
/// (`[env] pass`). Read through the daemon's own types; a broken file means none here,
/// and the daemon, which refuses it, says why.
#[derive(Debug, Default, Clone)]
pub struct Settings {
    clients: Vec<(String, ClientBudget)>,
    pass: Vec<String>,
}

impl Settings {
    pub fn load() -> Settings {
        ConfigFile::load()
            .map(|file| Settings::from_file(&file))
            .unwrap_or_default()
    }

    fn from_file(file: &ConfigFile) -> Settings {
        Settings {
            clients: file.mcp.clients.clone().into_iter().collect(),
            pass: file.env.pass.clone(),
        }
    }

    /// The budget of the client `name`, `None` for a client neither known nor
    /// configured: it gets the daemon's `[limits]`, as every result did before.
    pub fn budget(&self, name: Option<&str>) -> Option<Budget> {
        let name = name?;
        let known = known(name).map(|k| k.budget);
        let configured = self
            .clients
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, k)| *k);
        match (known, configured) {
            (known, Some(keys)) => {
                let base = known.unwrap_or(CONFIGURED_DEFAULT);
                Some(Budget {
                    result_lines: keys.result_lines.map_or(base.result_lines, Whole::get),
                    result_bytes: keys.result_bytes.map_or(base.result_bytes, Whole::get),
                    error_result_bytes: keys
                        .error_result_bytes
                        .or(keys.result_bytes)
                        .map_or(base.error_result_bytes, Whole::get),
                })
            }
            (known, None) => known,
        }
    }

    /// Whether the variable `name` is one of the client's own credentials that jobs
    /// do not get: those of the client's provider (every provider's for a client not
    /// known), unless `[env] pass` names it.
    pub fn withheld(&self, client: Option<&str>, name: &[u8]) -> bool {
        let credentials = client
            .and_then(known)
            .map_or(ALL_CREDENTIALS, |k| k.credentials);
        credentials.iter().any(|c| c.as_bytes() == name)
            && !self.pass.iter().any(|p| p.as_bytes() == name)
    }
}

/// The known client whose name `name` is or starts with (Gemini CLI has named its
/// client `gemini-cli-mcp-client-<server>`).
fn known(name: &str) -> Option<&'static Known> {
    KNOWN.iter().find(|k| name.starts_with(k.name))
}

/// Cuts `result`'s streams, whole lines at a time, until the text `render` makes of it
/// holds at most `max_bytes` and `max_lines`: the larger stream first, each from the
/// end its direction leaves out (a `tail` loses its first lines). The stream figures
/// are kept true, so the result names the exact call for what is not shown; a check's
/// result (`whole` false) says it in its `LinesNotShown` notice, which `first_line`
/// (the first line number a stream of the check shows) lets it name. Returns the text.
pub fn fit(
    result: &mut ExecResult,
    whole: bool,
    max_bytes: u64,
    max_lines: u64,
    first_line: &dyn Fn(StreamName) -> Option<u64>,
    render: &dyn Fn(&ExecResult) -> String,
) -> String {
    let mut text = render(result);
    // Each round cuts at least a line or a line's bytes; a few rounds suffice.
    for _ in 0..16 {
        let (bytes, lines) = (text.len() as u64, text.lines().count() as u64);
        if bytes <= max_bytes && lines <= max_lines {
            break;
        }
        // The hint a newly cut stream gets takes a line of its own.
        let excess_bytes =
            bytes.saturating_sub(max_bytes) + if bytes > max_bytes { 256 } else { 0 };
        let excess_lines = lines.saturating_sub(max_lines) + if lines > max_lines { 2 } else { 0 };
        let stderr_bytes = result.stderr.as_ref().map_or(0, |s| s.text.len());
        // A screen stands in for stdout: only stderr can be cut then.
        let name = if result.screen.is_none() && result.stdout.text.len() >= stderr_bytes {
            StreamName::Stdout
        } else {
            StreamName::Stderr
        };
        let stream = match name {
            StreamName::Stdout => &mut result.stdout,
            StreamName::Stderr => match result.stderr.as_mut() {
                Some(stream) => stream,
                None => break,
            },
        };
        if stream.text.is_empty() {
            break;
        }
        let before = stream.shown_lines;
        let was_truncated = stream.truncated;
        cut(stream, excess_bytes, excess_lines);
        let cut_lines = before.saturating_sub(stream.shown_lines);
        if !whole {
            note_check_cut(result, name, cut_lines, was_truncated, first_line);
        }
        text = render(result);
    }
    text
}

/// Cuts at least `bytes` bytes and `lines` lines off `stream`'s shown text (on a
/// char boundary within its one line, when one line is all it shows).
fn cut(stream: &mut StreamResult, bytes: u64, lines: u64) {
    if stream.direction == Direction::HeadTail && !cut_after_marker(stream, bytes, lines) {
        // A stream shown whole: a cut from its start reads right as a tail.
        stream.direction = Direction::Tail;
    }
    if stream.direction == Direction::HeadTail {
        return;
    }
    let from_start = stream.direction == Direction::Tail;
    let text = std::mem::take(&mut stream.text);
    let line_ends: Vec<usize> = text
        .match_indices('\n')
        .map(|(i, _)| i + 1)
        .chain((!text.ends_with('\n')).then_some(text.len()))
        .collect();
    let n_lines = line_ends.len();
    let mut kept = text.as_str();
    let mut removed = 0usize;
    let mut removed_lines = 0u64;
    while removed_lines < n_lines.saturating_sub(1) as u64
        && ((removed as u64) < bytes || removed_lines < lines)
    {
        removed_lines += 1;
        kept = if from_start {
            &text[line_ends[removed_lines as usize - 1]..]
        } else {
            &text[..line_ends[n_lines - 1 - removed_lines as usize]]
        };
        removed = text.len() - kept.len();
    }
    let mut kept = kept.to_owned();
    if removed_lines > 0 {
        // The cut line, if there was one, was at the end now gone.
        stream.partial = false;
    }
    if (removed as u64) < bytes {
        // One line is left, and it is still too long: keep a part of it.
        let keep = (kept.len() as u64).saturating_sub(bytes - removed as u64) as usize;
        kept = if from_start {
            let mut at = kept.len() - keep;
            while !kept.is_char_boundary(at) {
                at += 1;
            }
            kept[at..].to_owned()
        } else {
            let mut at = keep;
            while !kept.is_char_boundary(at) {
                at -= 1;
            }
            kept[..at].to_owned()
        };
        stream.partial = true;
    }
    stream.shown_lines = stream.shown_lines.saturating_sub(removed_lines);
    if stream.partial {
        stream.shown_lines = stream.shown_lines.max(1);
    }
    stream.shown_bytes = kept.len() as u64;
    stream.text = kept;
    stream.truncated = true;
    stream.truncated_by = Some(TruncatedBy::Bytes);
}

/// Cuts a `head_tail` stream's lines right after its `... [N lines omitted] ...`
/// marker, so that what it leaves out stays one stretch; false when it has no marker.
fn cut_after_marker(stream: &mut StreamResult, bytes: u64, lines: u64) -> bool {
    if stream.partial || !stream.truncated {
        return false;
    }
    let hidden = stream.total_lines.saturating_sub(stream.shown_lines);
    let marker = format!("... [{hidden} lines omitted] ...");
    let all: Vec<&str> = stream.text.split_inclusive('\n').collect();
    let Some(at) = all.iter().position(|l| l.trim_end_matches('\n') == marker) else {
        return false;
    };
    let (mut removed, mut removed_lines) = (0u64, 0u64);
    let mut end = at + 1;
    // Leave the tail its last line: the end of the output says most.
    while end + 1 < all.len() && (removed < bytes || removed_lines < lines) {
        removed += all[end].len() as u64;
        removed_lines += 1;
        end += 1;
    }
    if removed_lines == 0 {
        // Only the head is left to cut: a tail of it reads right.
        return false;
    }
    let hidden = hidden + removed_lines;
    let mut text: String = all[..at].concat();
    text.push_str(&format!("... [{hidden} lines omitted] ...\n"));
    text.push_str(&all[end..].concat());
    stream.shown_lines -= removed_lines;
    stream.shown_bytes = text.len() as u64;
    stream.text = text;
    stream.truncated_by = Some(TruncatedBy::Bytes);
    true
}

/// A check's result says in a `LinesNotShown` notice which of its new lines it does
/// not show: the cut lines join it (they were just before the lines shown).
fn note_check_cut(
    result: &mut ExecResult,
    name: StreamName,
    cut_lines: u64,
    was_truncated: bool,
    first_line: &dyn Fn(StreamName) -> Option<u64>,
) {
    if cut_lines == 0 {
        return;
    }
    let existing = result.notices.iter_mut().find_map(|n| match n {
        Notice::LinesNotShown { stream, lines, .. } if *stream == name => Some(lines),
        _ => None,
    });
    match existing {
        Some(lines) => *lines += cut_lines,
        None if !was_truncated => {
            if let Some(offset) = first_line(name) {
                result.notices.push(Notice::LinesNotShown {
                    job: result.job,
                    stream: name,
                    offset,
                    lines: cut_lines,
                });
            }
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use bashc::protocol::{JobId, JobState};

    use super::*;

    fn stream(lines: std::ops::RangeInclusive<u64>, direction: Direction) -> StreamResult {
        let text: String = lines.clone().map(|n| format!("{n}\n")).collect();
        let count = lines.count() as u64;
        StreamResult {
            shown_bytes: text.len() as u64,
            text,
            truncated: false,
            truncated_by: None,
            direction,
            total_lines: count,
            total_bytes: 0,
            shown_lines: count,
            partial: false,
            full_output: None,
        }
    }

    fn result(stdout: StreamResult) -> ExecResult {
        ExecResult {
            job: JobId(1),
            session: "s".into(),
            pid: Some(1),
            state: JobState::Exited,
            exit_code: Some(0),
            signal: None,
            duration_ms: 1,
            backgrounded: false,
            description: None,
            workdir: "/".into(),
            stdout,
            stderr: None,
            notices: Vec::new(),
            record: None,
            sandbox: None,
            screen: None,
        }
    }

    fn text_of(result: &ExecResult) -> String {
        result.stdout.text.clone()
    }

    #[test]
    fn a_tail_loses_its_first_lines_and_says_so_in_its_figures() {
        let mut cut = result(stream(1..=1000, Direction::Tail));
        let text = fit(&mut cut, true, 500, 10_000, &|_| None, &text_of);
        assert!(text.len() <= 500, "{}", text.len());
        let first: u64 = text.lines().next().unwrap().parse().unwrap();
        assert!(text.ends_with("1000\n"));
        assert!(cut.stdout.truncated);
        assert_eq!(cut.stdout.shown_lines, 1000 - first + 1);
        assert_eq!(cut.stdout.shown_bytes, text.len() as u64);
    }

    #[test]
    fn a_head_loses_its_last_lines() {
        let mut cut = result(stream(1..=1000, Direction::Head));
        let text = fit(&mut cut, true, 10_000, 100, &|_| None, &text_of);
        assert!(text.starts_with("1\n") && text.lines().count() <= 100);
        assert_eq!(cut.stdout.shown_lines, text.lines().count() as u64);
    }

    #[test]
    fn a_head_tail_loses_the_lines_after_its_marker() {
        let mut whole = stream(1..=10, Direction::HeadTail);
        whole.text = "1\n2\n... [990 lines omitted] ...\n993\n994\n995\n996\n997\n998\n999\n1000\n"
            .to_owned();
        whole.total_lines = 1000;
        whole.shown_lines = 10;
        whole.truncated = true;
        let mut cut = result(whole);
        let text = fit(&mut cut, true, 10_000, 6, &|_| None, &text_of);
        assert!(text.starts_with("1\n2\n... [99"), "{text}");
        assert!(text.ends_with("1000\n"), "{text}");
        let hidden = cut.stdout.total_lines - cut.stdout.shown_lines;
        assert!(
            text.contains(&format!("... [{hidden} lines omitted] ...")),
            "{text}"
        );
    }

    #[test]
    fn one_long_line_is_cut_on_a_char_boundary() {
        let mut long = stream(1..=1, Direction::Tail);
        long.text = format!("{}\n", "é".repeat(1000));
        long.shown_bytes = long.text.len() as u64;
        let mut cut = result(long);
        let text = fit(&mut cut, true, 301, 100, &|_| None, &text_of);
        assert!(text.len() <= 301 && text.ends_with("é\n"), "{}", text.len());
        assert!(cut.stdout.partial && cut.stdout.shown_lines == 1);
    }

    #[test]
    fn a_checks_cut_lines_join_its_notice_or_make_one() {
        let mut check = result(stream(501..=1000, Direction::Tail));
        let text = fit(&mut check, false, 1_000, 10_000, &|_| Some(501), &text_of);
        let first: u64 = text.lines().next().unwrap().parse().unwrap();
        assert_eq!(
            check.notices,
            [Notice::LinesNotShown {
                job: JobId(1),
                stream: StreamName::Stdout,
                offset: 501,
                lines: first - 501,
            }]
        );
        let mut check = result(stream(501..=1000, Direction::Tail));
        check.stdout.truncated = true;
        check.notices.push(Notice::LinesNotShown {
            job: JobId(1),
            stream: StreamName::Stdout,
            offset: 1,
            lines: 500,
        });
        let text = fit(&mut check, false, 1_000, 10_000, &|_| None, &text_of);
        let first: u64 = text.lines().next().unwrap().parse().unwrap();
        assert!(matches!(
            check.notices[..],
            [Notice::LinesNotShown { offset: 1, lines, .. }] if lines == first - 1
        ));
    }

    #[test]
    fn budgets_come_from_the_name_and_the_config() {
        let settings = Settings::from_file(
            &ConfigFile::parse(
                "[mcp.clients.\"codex-mcp-client\"]\nresult_bytes = 20000\n[mcp.clients.cursor]\nresult_lines = 50\n[env]\npass = [\"OPENAI_API_KEY\"]\n",
                std::path::Path::new("config.toml"),
            )
            .unwrap(),
        );
        assert_eq!(settings.budget(None), None);
        assert_eq!(settings.budget(Some("some-agent")), None);
        let gemini = settings
            .budget(Some("gemini-cli-mcp-client-bashd"))
            .unwrap();
        assert_eq!(gemini.result_bytes, 36_000);
        let codex = settings.budget(Some("codex-mcp-client")).unwrap();
        assert_eq!(
            (codex.result_bytes, codex.error_result_bytes),
            (20_000, 20_000)
        );
        assert_eq!(settings.budget(Some("cursor")).unwrap().result_lines, 50);
        assert!(settings.withheld(Some("claude-code"), b"ANTHROPIC_API_KEY"));
        assert!(!settings.withheld(Some("claude-code"), b"OPENAI_API_KEY"));
        assert!(!settings.withheld(None, b"OPENAI_API_KEY"));
        assert!(settings.withheld(None, b"GEMINI_API_KEY"));
        assert!(!settings.withheld(None, b"PATH"));
    }
}
