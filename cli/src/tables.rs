//! The tables of `bashc jobs` and `bashc sessions` (and `bash_jobs`): columns padded to
//! their widest cell, so that long states and session names keep them aligned.

use bashc::protocol::text::for_person;
use bashc::protocol::{JobInfo, JobState, Network, SandboxInForce, SessionInfo};

/// How a column's cells sit in its width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Align {
    Left,
    Right,
}

/// Rows under a header, each column as wide as its widest cell, two spaces apart. The
/// last column is not padded, so lines carry no trailing spaces.
fn table(header: &[(&str, Align)], rows: &[Vec<String>]) -> String {
    let width = |column: usize| {
        rows.iter()
            .map(|row| row[column].chars().count())
            .chain([header[column].0.chars().count()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let heading: Vec<String> = header.iter().map(|(name, _)| (*name).to_owned()).collect();
    let mut out = String::new();
    for row in std::iter::once(&heading).chain(rows) {
        let mut line = String::new();
        for (column, cell) in row.iter().enumerate() {
            let last = column + 1 == row.len();
            let pad = widths[column].saturating_sub(cell.chars().count());
            if column > 0 {
                line.push_str("  ");
            }
            match header[column].1 {
                Align::Right => {
                    line.extend(std::iter::repeat_n(' ', pad));
                    line.push_str(cell);
                }
                Align::Left if last => line.push_str(cell),
                Align::Left => {
                    line.push_str(cell);
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The columns of a job's line, as [`job_row`] fills them.
const JOB_COLUMNS: [(&str, Align); 9] = [
    ("JOB", Align::Left),
    ("SESSION", Align::Left),
    ("STATE", Align::Left),
    ("EXIT", Align::Right),
    ("MODE", Align::Left),
    ("PID", Align::Right),
    ("TIME", Align::Right),
    ("PORTS", Align::Left),
    ("COMMAND", Align::Left),
];

/// `bashc jobs`: one line a job, newest last.
pub fn jobs_text(jobs: &[JobInfo]) -> String {
    if jobs.is_empty() {
        return "no jobs\n".to_owned();
    }
    let rows: Vec<Vec<String>> = jobs.iter().map(job_row).collect();
    table(&JOB_COLUMNS, &rows)
}

/// One job's cells under the header of [`jobs_text`].
fn job_row(job: &JobInfo) -> Vec<String> {
    // What the job was asked to run is the agent's text, shown to a person: made
    // inert first, then cut, so an escape is never cut in half into something live.
    let mut command = one_line(&for_person(&job.command), 60);
    if let Some(description) = &job.description {
        command.push_str("  # ");
        command.push_str(&one_line(&for_person(description), 60));
    }
    if let Some(sandbox) = job.sandbox {
        command.push_str(&sandbox_note(sandbox));
    }
    vec![
        job.job.to_string(),
        job.session.clone(),
        if job.waiting_for_input {
            format!("{} (waiting for input?)", job.state)
        } else {
            job.state.to_string()
        },
        match (job.state, job.exit_code) {
            // Still running: no status yet, unless its shell has exited.
            (JobState::Running, None) => "-".to_owned(),
            (state, exit_code) => {
                crate::render::status_of(state, exit_code, job.signal).to_string()
            }
        },
        job.mode.clone(),
        job.pid.map_or("-".to_owned(), |p| p.to_string()),
        format!("{}s", job.duration_ms / 1000),
        ports_cell(&job.ports),
        command,
    ]
}

/// `bashc jobs --all --host a --host b`: the jobs of several hosts in one table, a HOST
/// column first; a host that did not answer gets a line of its own after the table.
pub fn jobs_of_hosts_text(hosts: &[(String, Result<Vec<JobInfo>, String>)]) -> String {
    let header: Vec<(&str, Align)> = std::iter::once(("HOST", Align::Left))
        .chain(JOB_COLUMNS)
        .collect();
    let rows: Vec<Vec<String>> = hosts
        .iter()
        .filter_map(|(host, jobs)| Some((host, jobs.as_ref().ok()?)))
        .flat_map(|(host, jobs)| {
            jobs.iter().map(move |job| {
                let mut row = vec![host.clone()];
                row.extend(job_row(job));
                row
            })
        })
        .collect();
    let mut out = if rows.is_empty() {
        "no jobs\n".to_owned()
    } else {
        table(&header, &rows)
    };
    for (_, jobs) in hosts {
        if let Err(error) = jobs {
            out.push_str(&format!("unreachable: {error}\n"));
        }
    }
    out
}

/// `8000,5353/udp`: the ports a job listens on, TCP bare and UDP marked; `-` for none.
fn ports_cell(ports: &[bashc::protocol::ListenPort]) -> String {
    let mut cells: Vec<String> = ports
        .iter()
        .map(|p| match (p.protocol.as_str(), p.published) {
            // Published on the host's loopback at another port (issue 43).
            ("tcp", Some(host)) if host != p.port => format!("{}->{host}", p.port),
            ("tcp", _) => p.port.to_string(),
            (other, _) => format!("{}/{other}", p.port),
        })
        .collect();
    cells.dedup();
    if cells.is_empty() {
        "-".to_owned()
    } else {
        cells.join(",")
    }
}

/// What a confined job's line says of its sandbox: with the network off or the
/// allow-list, that its ports answer in its session's network and on the host's
/// loopback where bashd publishes them (PORTS: `8000->40123` when another port).
fn sandbox_note(sandbox: SandboxInForce) -> String {
    match sandbox.network {
        Network::Off => format!(
            "  [sandbox {}, network off: its ports answer its session's jobs, and on the host's 127.0.0.1]",
            sandbox.profile
        ),
        Network::AllowList => format!(
            "  [sandbox {}, network allow-list: its ports answer its session's jobs, and on the host's 127.0.0.1]",
            sandbox.profile
        ),
        Network::On => format!("  [sandbox {}]", sandbox.profile),
    }
}

/// `bashc sessions`.
pub fn sessions_text(sessions: &[SessionInfo]) -> String {
    if sessions.is_empty() {
        return "no sessions\n".to_owned();
    }
    use Align::{Left, Right};
    let header = [
        ("SESSION", Left),
        ("STATE", Left),
        ("RUNNING", Right),
        ("FINISHED", Right),
        ("OWNERS", Left),
    ];
    let rows: Vec<Vec<String>> = sessions
        .iter()
        .map(|session| {
            let owners: Vec<String> = session.owners.iter().map(u32::to_string).collect();
            let state = match session.linger_left_secs {
                Some(left) if session.state == "lingering" => format!("lingering ({left} s left)"),
                _ => session.state.clone(),
            };
            vec![
                session.session.clone(),
                state,
                session.running_jobs.to_string(),
                session.finished_jobs.to_string(),
                if owners.is_empty() {
                    "-".to_owned()
                } else {
                    owners.join(",")
                },
            ]
        })
        .collect();
    table(&header, &rows)
}

/// The first line of `text`, at most `max` chars, marked when cut.
fn one_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    let cut = line.chars().count() > max || line.len() < text.trim_end().len();
    let mut shown: String = line.chars().take(max).collect();
    if cut {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use bashc::protocol::{JobId, JobState};

    use super::*;

    /// Issue 43: a port of a session network published at another port on the host
    /// shows both; one published at its own port, or not at all, shows one.
    #[test]
    fn a_port_published_elsewhere_on_the_host_shows_both_numbers() {
        let port = |port, published| bashc::protocol::ListenPort {
            protocol: "tcp".to_owned(),
            port,
            address: "127.0.0.1".to_owned(),
            pid: 1,
            published,
        };
        let ports = [
            port(8000, Some(40123)),
            port(8001, Some(8001)),
            port(8002, None),
        ];
        assert_eq!(ports_cell(&ports), "8000->40123,8001,8002");
    }

    fn job(id: u64, session: &str, state: JobState, exit_code: Option<i32>) -> JobInfo {
        JobInfo {
            job: JobId(id),
            session: session.to_owned(),
            pid: Some(4000 + id as u32),
            state,
            exit_code,
            signal: None,
            mode: "default".to_owned(),
            command: format!("sleep {id}"),
            description: None,
            started_at: "2025-01-01T00:00:00Z".to_owned(),
            duration_ms: id * 1500,
            record: None,
            ports: Vec::new(),
            waiting_for_input: false,
            sandbox: None,
        }
    }

    /// Issue 23: a job with the network off says its ports answer only inside it.
    #[test]
    fn a_confined_job_says_its_sandbox() {
        let mut offline = job(3, "s", JobState::Running, None);
        offline.sandbox = Some(SandboxInForce {
            profile: bashc::protocol::SandboxProfile::WorkspaceWrite,
            network: Network::Off,
        });
        let text = jobs_text(&[offline]);
        assert!(
            text.contains(
                "sleep 3  [sandbox workspace-write, network off: its ports answer its session's jobs, and on the host's 127.0.0.1]"
            ),
            "{text}"
        );
    }

    /// Issue 30: a command and description that hold escape sequences (the clipboard
    /// by OSC 52, a clear screen) or bidirectional controls reach the person's
    /// terminal, in `bashc jobs` and `bash_jobs` alike, as visible text only.
    #[test]
    fn a_jobs_command_and_description_drive_no_terminal() {
        let mut sly = job(5, "s", JobState::Running, None);
        sly.command = "printf '\u{1b}]52;c;cm0gLXJmIH4=\u{7}' \u{202e}# txt.exe".to_owned();
        sly.description = Some("\u{1b}[2J\u{1b}]0;title\u{7}build \u{2067}x".to_owned());
        let text = jobs_text(&[sly]);
        assert!(
            !text
                .chars()
                .any(bashc::protocol::text::is_unsafe_for_terminal),
            "{text:?}"
        );
        assert!(
            text.contains(
                "printf '\\x1b]52;c;cm0gLXJmIH4=\\x07' \\u{202e}# txt.exe  # \\x1b[2J\\x1b]0;title\\x07build \\u{2067}x"
            ),
            "{text}"
        );
        // Positive control: a plain command is shown as it is.
        assert!(jobs_text(&[job(6, "s", JobState::Running, None)]).contains("  sleep 6\n"));
    }

    /// Issue 24: `timed_out    - default` and the like; every column starts where its
    /// header does, whatever the longest cell.
    #[test]
    fn jobs_columns_align_with_long_states_and_session_names() {
        let mut described = job(
            12,
            "a-rather-long-session-name-of-an-agent",
            JobState::Exited,
            Some(0),
        );
        described.description = Some("run the tests".to_owned());
        described.mode = "background".to_owned();
        let mut server = job(7, "s", JobState::Running, None);
        let port = |protocol: &str, port| bashc::protocol::ListenPort {
            protocol: protocol.to_owned(),
            port,
            address: "0.0.0.0".to_owned(),
            pid: 4007,
            published: None,
        };
        server.ports = vec![port("tcp", 8000), port("udp", 5353)];
        let mut reader = job(8, "s", JobState::Running, None);
        reader.waiting_for_input = true;
        // Issue 33: a job a signal ended shows 128+N, as `kill` and `wait` exit.
        let mut signaled = job(1003, "s", JobState::Signaled, None);
        signaled.signal = Some(15);
        let jobs = vec![
            job(1, "s", JobState::TimedOut, None),
            server,
            reader,
            described,
            signaled,
        ];
        let expected = "\
JOB    SESSION                                 STATE                         EXIT  MODE         PID   TIME  PORTS          COMMAND
j1     s                                       timed_out                      124  default     4001     1s  -              sleep 1
j7     s                                       running                          -  default     4007    10s  8000,5353/udp  sleep 7
j8     s                                       running (waiting for input?)     -  default     4008    12s  -              sleep 8
j12    a-rather-long-session-name-of-an-agent  exited                           0  background  4012    18s  -              sleep 12  # run the tests
j1003  s                                       signaled                       143  default     5003  1504s  -              sleep 1003
";
        assert_eq!(jobs_text(&jobs), expected);
    }

    #[test]
    fn sessions_columns_align_with_lingering_states_and_long_names() {
        let session = |name: &str, state: &str, left, owners: Vec<u32>| SessionInfo {
            session: name.to_owned(),
            owners,
            state: state.to_owned(),
            linger_left_secs: left,
            running_jobs: 3,
            finished_jobs: 120,
            dir: format!("/r/sessions/{name}"),
        };
        let sessions = vec![
            session("agent-4242", "active", None, vec![4242, 4300]),
            session(
                "mcp-a-very-long-session-name",
                "lingering",
                Some(898),
                vec![],
            ),
            session("s", "closing", None, vec![1]),
        ];
        let expected = "\
SESSION                       STATE                   RUNNING  FINISHED  OWNERS
agent-4242                    active                        3       120  4242,4300
mcp-a-very-long-session-name  lingering (898 s left)        3       120  -
s                             closing                       3       120  1
";
        assert_eq!(sessions_text(&sessions), expected);
        assert_eq!(sessions_text(&[]), "no sessions\n");
    }
}
