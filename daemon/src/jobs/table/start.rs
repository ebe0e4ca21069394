//! Starting jobs, the table's side: when the reaper's answer to a job's spawn comes
//! back as a report, the job is handed to a supervisor, or ends `failed`; a job that
//! ends joins its session's finished jobs. The request's side is `requests/exec.rs`.

use std::io;

use bashd_protocol::{
    EndedBy, ErrorKind, ErrorReply, ExecResult, ExitRecord, JobId, JobState, Notice, Response,
    Started, StreamName, StreamResult,
};

use super::{JobsActor, Launch, Status};
use crate::jobs::job::supervisor::{self, Ended, InputWatch, JobMeta, JobRun, Streams};
use crate::jobs::os::spawn::Spawned;
use crate::journal::Leader;
use crate::output::{self, OutputSource};

impl JobsActor {
    /// The reaper's answer to the spawn of job `id`'s shell: the job runs under a
    /// supervisor, which finds in its control channel whatever stops came while it
    /// started; or the job failed.
    pub(in crate::jobs) fn spawned(&mut self, id: JobId, spawned: io::Result<Spawned>) {
        let mut spawned = match spawned {
            Ok(spawned) => spawned,
            Err(e) => return self.not_started(id, &e),
        };
        let n = id.0;
        // A starting job counts as running, so neither its session's end nor
        // `keep_finished` forgets it before this answer.
        let Some(mut job) = self.jobs.remove(&n) else {
            return;
        };
        let meta = job.meta();
        let (control, waiters, launch) = match job.status {
            Status::Starting {
                control,
                waiters,
                launch,
            } => (control, waiters, launch),
            // Never: only `exec` makes a starting job, and only this starts it.
            other => {
                job.status = other;
                self.jobs.insert(n, job);
                return;
            }
        };
        let Launch {
            events,
            control: control_rx,
            settings,
            cookie,
            command,
            subscriber,
            ..
        } = *launch;
        let pid = spawned.pid.as_raw_nonzero().get() as u32;
        let leader = Leader {
            pid,
            pgid: pid,
            start_time: spawned.start_time,
        };
        if let Err(e) = self.journal.leader(n, leader) {
            // The job line is there: a restart still finds the job by its cookie.
            tracing::warn!(job = %id, "cannot record the pid of the job in the journal: {e}");
        }
        tracing::info!(job = %id, session = %job.session, pid, command = %command, "job started");
        // The first response on the request's channel, so there is room for it.
        let _ = events.try_send(Response::Started(Started {
            job: id,
            session: job.session.clone(),
            pid,
        }));
        // The resident, where there is one, holds every process of the job.
        let root = spawned.held.as_ref().map_or(pid, |held| held.resident);
        let tty = spawned
            .pty
            .and_then(|_| crate::jobs::job::pty::slave_path(&spawned.stdout));
        let stdin = spawned.stdin.take().and_then(|fd| {
            crate::jobs::job::stdin::StdinHandle::start(fd)
                .inspect_err(
                    |e| tracing::warn!(job = %id, "cannot hold the stdin pipe of a job: {e}"),
                )
                .ok()
        });
        let watch = stdin.as_ref().map(|stdin| InputWatch {
            root,
            stdin_inode: stdin.inode,
            sample: None,
            tty: tty.clone(),
        });
        let activity = std::sync::Arc::default();
        let run_in_network = spawned.in_network.take();
        let run = JobRun {
            meta,
            processes: self.containment.job(&mut spawned, cookie),
            spawned,
            settings,
            subscriber,
            watch,
            root,
            activity: std::sync::Arc::clone(&activity),
        };
        tokio::spawn(supervisor::supervise(
            run,
            control_rx,
            events,
            self.reports_tx.clone(),
        ));
        job.pid = Some(pid);
        job.root = Some(root);
        job.stdin = stdin;
        job.in_network = run_in_network;
        job.status = Status::Running {
            control,
            waiters,
            activity,
        };
        self.jobs.insert(n, job);
        self.by_pid.insert(pid, n);
        self.watchers.touch(n);
    }

    /// Job `id`'s shell could not be spawned: the request gets an error, and the job
    /// ends `failed`.
    fn not_started(&mut self, id: JobId, error: &io::Error) {
        let message = format!(
            "cannot start {} for job {id}: {error}",
            self.shell.display()
        );
        tracing::error!("{message}");
        let Some(job) = self.jobs.get(&id.0) else {
            return;
        };
        let Status::Starting { launch, .. } = &job.status else {
            return;
        };
        // The first response on the request's channel, so there is room for it.
        let reply = ErrorReply::new(ErrorKind::Internal, message.clone());
        let _ = launch.events.try_send(Response::Error(reply));
        let notice = Notice::NotStarted { error: message };
        let ended = not_run(&job.meta(), launch.merged, JobState::Failed, notice);
        self.ended(ended);
    }

    /// A job that ended joins its session's finished jobs; the oldest beyond
    /// `keep_finished` are forgotten.
    pub(in crate::jobs) fn mark_finished(&mut self, session: &str, n: u64) {
        let keep = self.config.sessions.keep_finished;
        let Some(entry) = self.sessions.get_mut(session) else {
            return;
        };
        entry.finished.push_back(n);
        let mut forget = Vec::new();
        while entry.finished.len() > keep {
            forget.extend(entry.finished.pop_front());
        }
        for n in forget {
            self.forget(n);
        }
    }
}

/// The end of a job that never ran: refused by the policy, or not startable.
/// `merged`: its stderr was to go to its stdout.
pub(in crate::jobs) fn not_run(
    meta: &JobMeta,
    merged: bool,
    state: JobState,
    notice: Notice,
) -> Ended {
    Ended {
        result: ExecResult {
            job: meta.job,
            session: meta.session.clone(),
            pid: None,
            state,
            exit_code: None,
            signal: None,
            duration_ms: 0,
            backgrounded: false,
            description: meta.description.clone(),
            workdir: meta.workdir.clone(),
            stdout: StreamResult::empty(),
            stderr: (!merged).then(StreamResult::empty),
            notices: vec![notice],
            record: Some(ExitRecord {
                cpu_user_ms: None,
                cpu_system_ms: None,
                peak_rss_bytes: None,
                processes: Some(0),
                ended_by: EndedBy::NotRun,
                killed_by: None,
                limit: None,
            }),
            sandbox: None,
            screen: None,
        },
        streams: no_output(merged, true),
    }
}

/// The output of a job that has written none: it never ran (`ended`), or its shell is
/// still being spawned.
pub(in crate::jobs) fn no_output(merged: bool, ended: bool) -> Streams {
    let empty = OutputSource {
        content: output::Content::Memory(Vec::new()),
        total_lines: 0,
        complete_lines: 0,
        total_bytes: 0,
        complete: ended,
    };
    Streams {
        stderr: (!merged).then(|| empty.clone()),
        stdout: empty,
        printed_last: StreamName::Stdout,
    }
}
