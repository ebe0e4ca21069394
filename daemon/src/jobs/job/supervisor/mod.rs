//! One task per running job: it reads the job's pipes, enforces its timeout, answers
//! the request that started it, moves the job to the background (mode `background`, a
//! timeout with `on_timeout = background`, or processes the shell left running), stops
//! it on request, and turns the end of its last process into the job's result. Only it
//! asks for the job's processes to be ended, through containment ([`JobProcesses`]).
//!
//! Its state is three enums, each with the data of its state:
//! - [`Phase`], where the job is in its life: the leader (`bash -c`) runs; the leader
//!   has exited and its pipes get a moment to close, then containment is asked whether
//!   anything outlived it; stragglers run on in the background until the last exits;
//!   being stopped (timeout, `kill`, owner gone, session ended, shutdown); over;
//! - [`Shell`], whether the reaper has handed over the leader's status;
//! - [`Request`], whether the request that started the job has its answer.
//!
//! It is generic over the job's processes and takes its pipes and the leader's exit
//! channel as plain descriptors and a oneshot, so its unit tests (`tests.rs`) run it
//! on a fake that spawns nothing.
//!
//! About 600 lines: the state machine is read as one piece, its phases beside each
//! other; what it is given and says is `messages.rs`.

mod live;
mod messages;
mod pipes;
#[cfg(test)]
mod tests;

use std::time::Duration;

use bashd_protocol::{
    BackgroundWhy, EndedBy, ExecResult, ExitRecord, JobState, Killer, Notice, OnTimeout, Response,
    StreamName,
};
use tokio::sync::mpsc;

use crate::config::OnStraggler;
use crate::jobs::contain::{JobProcesses, Leader};
use crate::jobs::os::reaper::LeaderExit;
use crate::jobs::os::spawn::Spawned;
use crate::output::StreamCapture;
pub use live::{FOLLOW_QUEUE, Live, Subscriber};
pub use messages::*;
use pipes::{INPUT_IDLE, Inputs, PipeReader, Shell, Wake};

/// How long output is still read after the shell exits, for processes that inherited
/// its pipes and are about to close them.
const STRAGGLER_DRAIN: Duration = Duration::from_millis(100);
/// How long a stopped job's leader has to be reaped after its processes were killed.
const LEADER_REAP_WAIT: Duration = Duration::from_secs(2);

/// Runs the job to its end. `requester` is the channel of the request that started
/// it: it gets `Finished` once, when the job ends or moves to the background, and a
/// foreground job is stopped if it closes first. The job table hears of the end
/// (`Report::Ended`) before the requester does, so whatever the requester asks next
/// (status, jobs, check) already sees the job ended.
pub async fn supervise<P: JobProcesses>(
    run: JobRun<P>,
    control: mpsc::UnboundedReceiver<Control>,
    requester: mpsc::Sender<Response>,
    reports: mpsc::UnboundedSender<Report>,
) {
    let (ended, request, mut live) = Supervisor::new(run, control, requester, reports.clone())
        .run()
        .await;
    // A job in the background answered its request when it moved there.
    let answer = match request {
        Request::Waiting(requester) => Some((requester, ended.result.clone())),
        Request::Answered => None,
    };
    let files = [
        ended.result.stdout.full_output.clone(),
        ended
            .result
            .stderr
            .as_ref()
            .and_then(|s| s.full_output.clone()),
    ];
    let _ = reports.send(Report::Ended(Box::new(ended)));
    // Readers that missed lines are told before the answer; the job has ended for
    // everyone else already, so a slow reader holds up only itself.
    live.close(files).await;
    if let Some((requester, result)) = answer {
        let _ = requester.send(Response::Finished(Box::new(result))).await;
    }
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The shell runs.
    LeaderRuns,
    /// The shell has exited: its pipes get a moment to close, then containment says
    /// whether anything outlived it.
    LeaderExited,
    /// The shell left processes running: the job is in the background until the last
    /// of them exits.
    Stragglers,
    /// Every process gets the stop's signal, then SIGKILL.
    Stopping(Stop),
    /// No process of the job is left; `stopped` says how bashd ended it, if it did.
    Over { stopped: Option<Stop> },
}

/// Whether the request that started the job has its answer.
#[derive(Debug)]
enum Request {
    /// Not yet: `Finished` goes here when the job ends or moves to the background.
    Waiting(mpsc::Sender<Response>),
    /// It was answered with state `running` when the job moved to the background.
    Answered,
}

/// Phase `LeaderRuns`'s own events.
enum LeaderEvent {
    Deadline,
    Abandoned,
    /// A first look at the job's CPU time, [`INPUT_IDLE`] before its deadline.
    Prime,
    /// The request's `answer_by` came.
    AnswerBy,
}

/// Phase `Stragglers`'s own events.
enum StragglerEvent {
    AllExited,
    Deadline,
}

struct Supervisor<P> {
    meta: JobMeta,
    /// The leader's pid, which results show.
    pid: u32,
    settings: Settings,
    /// When the job goes by its timeout; moved on to `background_timeout` when a
    /// timeout sends it to the background. Tokio's clock, as every wait here, so that
    /// tests can pause it.
    deadline: tokio::time::Instant,
    request: Request,
    /// The request was answered before the job's timeout for another reason than its
    /// mode (an MCP call's budget or cancel): at the timeout, the job goes by
    /// `on_timeout` as if it were still in the foreground.
    answered_early: bool,
    reports: mpsc::UnboundedSender<Report>,
    /// Apart from `inputs`, so that a phase can wait on the processes while `inputs`
    /// reads the pipes.
    processes: P,
    inputs: Inputs,
    /// Seconds the job had waited for input when it passed its timeout, if it had.
    waiting_at_timeout: Option<(u64, Option<String>)>,
}

impl<P: JobProcesses> Supervisor<P> {
    fn new(
        run: JobRun<P>,
        control: mpsc::UnboundedReceiver<Control>,
        requester: mpsc::Sender<Response>,
        reports: mpsc::UnboundedSender<Report>,
    ) -> Supervisor<P> {
        let JobRun {
            meta,
            spawned,
            processes,
            settings,
            subscriber,
            watch,
            root,
            activity,
        } = run;
        let Spawned {
            pid,
            stdout,
            stderr,
            exit,
            pty,
            ..
        } = spawned;
        let merged = stderr.is_none();
        let capture = |stream: &str| {
            let path = settings.session_dir.join(format!("{}.{stream}", meta.job));
            StreamCapture::new(settings.limits, path, settings.detached)
                .with_budget(settings.spill_budget.clone())
        };
        let inputs = Inputs {
            out: match pty {
                Some(size) => PipeReader::terminal(stdout, size, capture("stdout")),
                None => PipeReader::new(Some(stdout), capture("stdout")),
            },
            err: PipeReader::new(stderr, capture("stderr")),
            merged,
            control: Some(control),
            shell: Shell::Running(exit),
            live: Live::default(),
            last_output: std::time::Instant::now(),
            printed_last: StreamName::Stdout,
            activity,
            watch,
            root,
            detach_asked: None,
        };
        let mut inputs = inputs;
        if let Some(subscriber) = subscriber {
            inputs.live.add(subscriber);
        }
        Supervisor {
            pid: pid.as_raw_nonzero().get() as u32,
            deadline: tokio::time::Instant::from_std(meta.started) + settings.timeout,
            meta,
            settings,
            request: Request::Waiting(requester),
            answered_early: false,
            reports,
            processes,
            inputs,
            waiting_at_timeout: None,
        }
    }

    /// Takes the job through its phases to its end.
    async fn run(mut self) -> (Ended, Request, Live) {
        if self.settings.detached {
            self.detach(BackgroundWhy::Requested).await;
        }
        let mut phase = Phase::LeaderRuns;
        let stopped = loop {
            phase = match phase {
                Phase::LeaderRuns => self.leader_runs().await,
                Phase::LeaderExited => self.leader_exited().await,
                Phase::Stragglers => self.stragglers().await,
                Phase::Stopping(stop) => {
                    self.terminate(stop).await;
                    Phase::Over {
                        stopped: Some(stop),
                    }
                }
                Phase::Over { stopped } => break stopped,
            };
        };
        self.last_output().await;
        self.inputs.finish();
        let live = std::mem::take(&mut self.inputs.live);
        let (ended, request) = self.end(stopped);
        (ended, request, live)
    }

    fn stop(&self, reason: StopReason) -> Stop {
        Stop::term(reason, self.settings.kill_grace)
    }

    /// Until the leader exits or the job is to stop.
    async fn leader_runs(&mut self) -> Phase {
        loop {
            if let Some(why) = self.inputs.detach_asked.take() {
                self.detach(why).await;
            }
            let deadline = self.deadline;
            let requester = match &self.request {
                Request::Waiting(requester) => Some(requester.clone()),
                Request::Answered => None,
            };
            let prime_at = self
                .inputs
                .watch
                .as_ref()
                .is_some_and(|w| w.sample.is_none())
                // A second early, so that the look at the deadline finds the whole
                // idle time behind it.
                .then(|| deadline.checked_sub(INPUT_IDLE + Duration::from_secs(1)))
                .flatten();
            let answer_by = self
                .settings
                .answer_by
                .filter(|_| requester.is_some())
                .map(|after| tokio::time::Instant::from_std(self.meta.started) + after);
            let phase = async move {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => LeaderEvent::Deadline,
                    () = closed(requester) => LeaderEvent::Abandoned,
                    () = sleep_until_some(prime_at) => LeaderEvent::Prime,
                    () = sleep_until_some(answer_by) => LeaderEvent::AnswerBy,
                }
            };
            match self.inputs.wake(phase).await {
                Wake::Stop(stop) => return Phase::Stopping(stop),
                Wake::Phase(LeaderEvent::Abandoned) => {
                    return Phase::Stopping(self.stop(StopReason::Abandoned));
                }
                Wake::Phase(LeaderEvent::Prime) => self.inputs.prime_probe().await,
                Wake::Phase(LeaderEvent::AnswerBy) => self.detach(BackgroundWhy::CallBudget).await,
                Wake::Phase(LeaderEvent::Deadline) => {
                    if matches!(self.request, Request::Waiting(_)) {
                        let probe = self.inputs.probe().await;
                        self.waiting_at_timeout =
                            probe.waiting_for_input.map(|idle| (idle, probe.prompt));
                    }
                    let settings = &self.settings;
                    let move_on = (matches!(self.request, Request::Waiting(_))
                        || self.answered_early)
                        && settings.on_timeout == OnTimeout::Background
                        && settings.background_timeout > settings.timeout;
                    if !move_on {
                        return Phase::Stopping(self.stop(StopReason::Timeout));
                    }
                    self.deadline = tokio::time::Instant::from_std(self.meta.started)
                        + settings.background_timeout;
                    self.answered_early = false;
                    self.detach(BackgroundWhy::Timeout).await;
                }
                Wake::LeaderExited => {
                    return match self.inputs.shell.status() {
                        Some(_) => Phase::LeaderExited,
                        // The reaper is gone: the daemon is going down, and nothing is
                        // left to watch the job with.
                        None => Phase::Over { stopped: None },
                    };
                }
                Wake::Busy => {}
            }
        }
    }

    /// The leader has exited: its pipes drain a moment, then processes it left
    /// running make the job a background job, or are killed.
    async fn leader_exited(&mut self) -> Phase {
        let drain_until = tokio::time::Instant::now() + STRAGGLER_DRAIN;
        while !self.inputs.pipes_done() {
            match self
                .inputs
                .wake(tokio::time::sleep_until(drain_until))
                .await
            {
                Wake::Phase(()) => break,
                Wake::Stop(stop) => return Phase::Stopping(stop),
                Wake::Busy | Wake::LeaderExited => {}
            }
        }
        if !self.processes.outlived_leader().await {
            return Phase::Over { stopped: None };
        }
        match self.settings.on_straggler {
            OnStraggler::Kill => Phase::Stopping(self.stop(StopReason::Stragglers)),
            OnStraggler::Background => {
                // In the background a job goes by the background limit, as one moved
                // by its timeout does: a dev server left by `npm run dev &` is not
                // killed at the foreground timeout.
                self.deadline = tokio::time::Instant::from_std(self.meta.started)
                    + self.settings.background_timeout;
                self.detach(BackgroundWhy::Stragglers).await;
                Phase::Stragglers
            }
        }
    }

    /// Until the last process the leader left has exited, the deadline, or a stop.
    async fn stragglers(&mut self) -> Phase {
        let deadline = self.deadline;
        let mut all_exited = std::pin::pin!(self.processes.all_exited());
        loop {
            let phase = async {
                tokio::select! {
                    () = &mut all_exited => StragglerEvent::AllExited,
                    () = tokio::time::sleep_until(deadline) => StragglerEvent::Deadline,
                }
            };
            match self.inputs.wake(phase).await {
                Wake::Phase(StragglerEvent::AllExited) => return Phase::Over { stopped: None },
                Wake::Phase(StragglerEvent::Deadline) => {
                    return Phase::Stopping(Stop::term(
                        StopReason::Timeout,
                        self.settings.kill_grace,
                    ));
                }
                Wake::Stop(stop) => return Phase::Stopping(stop),
                Wake::Busy | Wake::LeaderExited => {}
            }
        }
    }

    /// Has every process of the job ended, and waits a moment for the leader's status.
    async fn terminate(&mut self, stop: Stop) {
        let leader = match self.inputs.shell {
            Shell::Running(_) => Leader::Unreaped,
            Shell::Exited(_) => Leader::Reaped,
        };
        let mut terminated =
            std::pin::pin!(self.processes.terminate(stop.signal, stop.grace, leader));
        // Output read meanwhile is kept; a second stop changes nothing.
        while !matches!(self.inputs.wake(&mut terminated).await, Wake::Phase(_)) {}
        let reaped_by = tokio::time::Instant::now() + LEADER_REAP_WAIT;
        while let Shell::Running(_) = self.inputs.shell {
            let reaped = tokio::time::sleep_until(reaped_by);
            if let Wake::Phase(()) = self.inputs.wake(reaped).await {
                break;
            }
        }
    }

    /// What the last processes wrote on their way out is still worth showing.
    async fn last_output(&mut self) {
        let until = tokio::time::Instant::now() + STRAGGLER_DRAIN;
        while !self.inputs.pipes_done() {
            let drained = tokio::time::sleep_until(until);
            if let Wake::Phase(()) = self.inputs.wake(drained).await {
                break;
            }
        }
    }

    /// Answers the request now; the job runs on in the background.
    async fn detach(&mut self, why: BackgroundWhy) {
        let Request::Waiting(requester) = std::mem::replace(&mut self.request, Request::Answered)
        else {
            // Answered already: it keeps the first reason.
            return;
        };
        let timeout_secs = match why {
            BackgroundWhy::Timeout => Some(self.settings.timeout.as_secs()),
            // The budget it passed, which the front end names.
            BackgroundWhy::CallBudget => self.settings.answer_by.map(|after| after.as_secs()),
            BackgroundWhy::Requested | BackgroundWhy::Stragglers | BackgroundWhy::Cancelled => None,
        };
        self.answered_early = matches!(why, BackgroundWhy::CallBudget | BackgroundWhy::Cancelled);
        let notice = Notice::Background {
            job: self.meta.job,
            pid: self.pid,
            why,
            timeout_secs,
        };
        let seen = match why {
            // Nobody reads the answer to a cancelled call: a check starts at line 1.
            BackgroundWhy::Requested | BackgroundWhy::Cancelled => [0, 0],
            BackgroundWhy::Timeout | BackgroundWhy::Stragglers | BackgroundWhy::CallBudget => [
                self.inputs.out.capture.complete_lines(),
                self.inputs.err.capture.complete_lines(),
            ],
        };
        let mut notices = vec![notice];
        if why == BackgroundWhy::Timeout {
            notices.extend(self.waiting_notice());
        }
        self.inputs.settle_screen();
        let result = self.result(JobState::Running, notices, None);
        // Before the answer, so that a check sent on seeing it starts after `seen`.
        let _ = self.reports.send(Report::Backgrounded {
            job: self.meta.job,
            seen,
        });
        let _ = requester.send(Response::Finished(Box::new(result))).await;
    }

    fn result(
        &self,
        state: JobState,
        notices: Vec<Notice>,
        record: Option<ExitRecord>,
    ) -> ExecResult {
        let status = self.inputs.shell.status();
        let inputs = &self.inputs;
        let notices = self
            .settings
            .start_notices
            .iter()
            .cloned()
            .chain(notices)
            .collect();
        let mut result = ExecResult {
            job: self.meta.job,
            session: self.meta.session.clone(),
            pid: Some(self.pid),
            state,
            exit_code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
            duration_ms: crate::jobs::table::age_ms(self.meta.started),
            backgrounded: matches!(self.request, Request::Answered),
            description: self.meta.description.clone(),
            workdir: self.meta.workdir.clone(),
            stdout: inputs.out.capture.result(self.settings.shape),
            stderr: (!inputs.merged).then(|| inputs.err.capture.result(self.settings.shape)),
            notices,
            record,
            sandbox: self.settings.sandbox,
            screen: inputs
                .out
                .screen
                .as_ref()
                .map(|screen| {
                    let waiting = state == JobState::Running && self.waiting_at_timeout.is_some();
                    screen.info(self.meta.job, state, waiting)
                })
                // An ended job's primary screen is the end of its stdout already
                // (`Screen::finish`); only one left on the alternate screen is not.
                .filter(|screen| screen.drawn && (state == JobState::Running || screen.alternate)),
        };
        // Every result, a running job's too: a program on pipes that asked for a
        // terminal may wait rather than fail.
        let on_pipes = inputs.out.screen.is_none();
        result
            .notices
            .extend(crate::jobs::job::pty::wanted::terminal_wanted(
                &result, on_pipes,
            ));
        result
    }

    /// The job's result, from how it was stopped (if it was) and the leader's status.
    fn end(mut self, stopped: Option<Stop>) -> (Ended, Request) {
        self.inputs.out.capture.finish();
        self.inputs.err.capture.finish();
        let reason = stopped.map(|stop| stop.reason);
        let status = self.inputs.shell.status();
        let state = match (reason, status) {
            (Some(StopReason::Timeout), _) => JobState::TimedOut,
            (Some(StopReason::Stragglers), Some(status)) if status.signal().is_none() => {
                JobState::Exited
            }
            (Some(_), _) | (None, None) => JobState::Killed,
            (None, Some(status)) if status.signal().is_some() => JobState::Signaled,
            (None, Some(_)) => JobState::Exited,
        };
        let mut notices = Vec::new();
        let limit = match self.request {
            Request::Answered => self.settings.background_timeout,
            Request::Waiting(_) => self.settings.timeout,
        };
        let session = || self.meta.session.clone();
        match reason {
            Some(StopReason::Timeout) => {
                notices.push(Notice::TimedOut {
                    after_secs: limit.as_secs(),
                });
                notices.extend(self.waiting_notice());
            }
            Some(StopReason::Shutdown) => notices.push(Notice::Shutdown {}),
            Some(StopReason::OwnersGone) => notices.push(Notice::OwnersGone { session: session() }),
            Some(StopReason::SessionEnded) => {
                notices.push(Notice::SessionEnded { session: session() })
            }
            Some(StopReason::Stragglers) => notices.push(Notice::StragglersKilled {}),
            Some(StopReason::Killed(_) | StopReason::Abandoned) | None => {}
        }
        notices.extend(self.inputs.out.capture.notice(StreamName::Stdout));
        if !self.inputs.merged {
            notices.extend(self.inputs.err.capture.notice(StreamName::Stderr));
        }
        let (ended_by, killed_by) = match (reason, status) {
            (Some(StopReason::Timeout), _) => (EndedBy::Timeout, None),
            (Some(StopReason::Abandoned), _) => (EndedBy::Cancel, None),
            (Some(StopReason::Shutdown), _) => (EndedBy::Kill, Some(Killer::Shutdown)),
            (Some(StopReason::Killed(by)), _) => (EndedBy::Kill, Some(by)),
            (Some(StopReason::OwnersGone), _) => (EndedBy::OwnerGone, None),
            (Some(StopReason::SessionEnded), _) => (EndedBy::SessionClosed, None),
            // The shell ended by itself; what it left running went by the config.
            (Some(StopReason::Stragglers), _) | (None, Some(LeaderExit::Code(_))) => {
                (EndedBy::Exit, None)
            }
            (None, Some(LeaderExit::Signal(_))) => (EndedBy::Signal, None),
            // The reaper went away first: the daemon is going down.
            (None, None) => (EndedBy::Kill, Some(Killer::Shutdown)),
        };
        let usage = self.processes.usage();
        // A job that ended by itself may have been ended by the kernel for memory.
        let (ended_by, limit) = match (ended_by, usage.oom_killed) {
            (EndedBy::Exit | EndedBy::Signal, Some(Some(bytes))) => {
                (EndedBy::Limit, Some(format!("memory {bytes}")))
            }
            (EndedBy::Exit | EndedBy::Signal, Some(None)) => (EndedBy::Oom, None),
            (ended_by, _) => (ended_by, None),
        };
        let record = ExitRecord {
            cpu_user_ms: usage.cpu_user_us.map(|us| us / 1000),
            cpu_system_ms: usage.cpu_system_us.map(|us| us / 1000),
            peak_rss_bytes: usage.peak_rss_bytes,
            processes: None,
            ended_by,
            killed_by,
            limit,
        };
        let mut result = self.result(state, notices, Some(record));
        result
            .notices
            .extend(crate::sandbox::refusal(&result, &self.settings.deny_read));
        let ended = Ended {
            result,
            streams: self.inputs.streams(),
        };
        (ended, self.request)
    }
}

impl<P> Supervisor<P> {
    /// That the job waited for input when it passed its timeout, if it did.
    fn waiting_notice(&self) -> Option<Notice> {
        self.waiting_at_timeout
            .clone()
            .map(|(idle_secs, prompt)| Notice::WaitingForInput {
                job: self.meta.job,
                idle_secs,
                prompt,
            })
    }
}

/// Sleeps until `at`, or forever when there is none.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn closed(requester: Option<mpsc::Sender<Response>>) {
    match requester {
        Some(requester) => requester.closed().await,
        None => std::future::pending().await,
    }
}
