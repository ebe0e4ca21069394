//! The jobs of a daemon that died while they ran (state `lost`), which recovery ended
//! before this daemon served: the table lists them with what the journal recorded and
//! their spill files give, `output` and `check` read those files, and their sessions
//! linger as if every owner had just exited, so they last as long as the session would
//! have. Forgetting one (its session ends) writes its `end` line.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bashd_protocol::{
    ExecResult, JobId, JobState, Mode, Notice, StreamName, StreamResult, runtime,
};

use super::{Job, JobsActor, Status};
use crate::jobs::job::supervisor::{Ended, Streams};
use crate::jobs::table::session::Session;
use crate::journal::JobRecord;
use crate::output::{self, Content, OutputSource};

/// A job of a dead daemon, as recovery found it.
#[derive(Debug)]
pub struct LostJob {
    pub job: JobId,
    pub session: String,
    /// Its `info` line, when the journal has one.
    pub info: Option<JobRecord>,
    /// Its spill files read back, with when each was last written.
    pub stdout: Option<(OutputSource, SystemTime)>,
    pub stderr: Option<(OutputSource, SystemTime)>,
}

impl LostJob {
    /// Reads what job `job` of session `session` left in runtime dir `dir`. Blocking.
    pub fn read(
        dir: &std::path::Path,
        job: JobId,
        session: &str,
        info: Option<JobRecord>,
    ) -> LostJob {
        let session_dir = runtime::sessions_dir(dir).join(session);
        let read = |stream: &str| {
            let path = session_dir.join(format!("{job}.{stream}"));
            output::recovered_source(&path).unwrap_or_else(|e| {
                tracing::warn!("cannot read {} of lost job {job}: {e}", path.display());
                None
            })
        };
        LostJob {
            job,
            session: session.to_owned(),
            stdout: read("stdout"),
            stderr: read("stderr"),
            info,
        }
    }
}

impl JobsActor {
    /// Lists the dead daemon's jobs, each in its session, which lingers.
    pub fn keep_lost(&mut self, lost: Vec<LostJob>) {
        for lost in lost {
            let n = lost.job.0;
            if !self.sessions.contains_key(&lost.session) {
                let mut session = Session::default();
                session.linger(
                    &lost.session,
                    self.config.sessions.linger,
                    &self.session_events_tx,
                );
                self.sessions.insert(lost.session.clone(), session);
            }
            let job = self.lost_job(lost);
            let session = job.session.clone();
            if let Status::Ended(ended) = &job.status {
                let files = super::spill_files(&ended.streams);
                let bytes = [Some(&ended.streams.stdout), ended.streams.stderr.as_ref()]
                    .into_iter()
                    .flatten()
                    .map(|s| s.total_bytes)
                    .sum();
                self.spill_ledger.finished(&session, n, files, Some(bytes));
            }
            self.jobs.insert(n, job);
            if let Some(entry) = self.sessions.get_mut(&session) {
                entry.jobs.insert(n);
            }
            self.mark_finished(&session, n);
        }
    }

    fn lost_job(&self, lost: LostJob) -> Job {
        let info = lost.info.unwrap_or(JobRecord {
            started_ms: 0,
            mode: Mode::Default,
            merged: false,
            workdir: String::new(),
            command: String::new(),
            description: None,
        });
        let started_at = UNIX_EPOCH + Duration::from_millis(info.started_ms);
        // Its age when this daemon found it: when it ended is not known (it ran at
        // least until its last write, and at most until now), and its last write
        // would make a job that went quiet look as young as its last line (issue 45).
        // Without its record its start is not known either.
        let duration_ms = SystemTime::now()
            .duration_since(started_at)
            .ok()
            .filter(|_| info.started_ms > 0)
            .map_or(0, |d| d.as_millis() as u64);
        let mut in_memory = Vec::new();
        let mut stream = |kept: Option<(OutputSource, SystemTime)>, name: StreamName| {
            let (source, result) = match kept {
                Some((source, _)) => {
                    let result = kept_result(&source);
                    (source, result)
                }
                None => {
                    in_memory.push(name);
                    let source = OutputSource {
                        content: Content::Memory(Vec::new()),
                        total_lines: 0,
                        complete_lines: 0,
                        total_bytes: 0,
                        complete: true,
                    };
                    (source, StreamResult::empty())
                }
            };
            (source, result)
        };
        let (stdout, stdout_result) = stream(lost.stdout, StreamName::Stdout);
        let stderr = (!info.merged).then(|| stream(lost.stderr, StreamName::Stderr));
        let (stderr, stderr_result) = match stderr {
            Some((source, result)) => (Some(source), Some(result)),
            None => (None, None),
        };
        let background = info.mode == Mode::Background;
        let result = ExecResult {
            job: lost.job,
            session: lost.session.clone(),
            pid: None,
            state: JobState::Lost,
            exit_code: None,
            signal: None,
            duration_ms,
            backgrounded: background,
            description: info.description.clone(),
            workdir: info.workdir.clone(),
            stdout: stdout_result,
            stderr: stderr_result,
            notices: vec![Notice::Lost {
                job: lost.job,
                in_memory,
            }],
            record: None,
            sandbox: None,
            screen: None,
        };
        Job {
            id: lost.job,
            session: lost.session,
            command: info.command,
            description: info.description,
            workdir: info.workdir,
            mode: info.mode,
            pid: None,
            started_at,
            started: Instant::now(),
            background,
            cursors: HashMap::new(),
            page_lines: self.config.limits.max_lines.into(),
            max_bytes: self.config.limits.max_bytes as usize,
            status: Status::Ended(Box::new(Ended {
                result,
                // Which stream printed last died with the daemon that knew it.
                streams: Streams {
                    stdout,
                    stderr,
                    printed_last: StreamName::Stdout,
                },
            })),
            root: None,
            stdin: None,
            stdin_mode: bashd_protocol::StdinMode::default(),
            sandbox: None,
            roots: None,
            channel: None,
            in_network: None,
            notify: None,
        }
    }
}

/// A kept stream in a result: its figures and its file; the text is for
/// `output` to page.
fn kept_result(source: &OutputSource) -> StreamResult {
    let full_output = match &source.content {
        Content::File { path, .. } => Some(path.to_string_lossy().into_owned()),
        Content::Memory(_) => None,
    };
    StreamResult {
        truncated: source.total_bytes > 0,
        total_lines: source.total_lines,
        total_bytes: source.total_bytes,
        full_output,
        ..StreamResult::empty()
    }
}
