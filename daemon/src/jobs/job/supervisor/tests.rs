//! The supervisor's state machine on a fake job (watchexec's `TestChild` is the
//! model): pipes the test writes into, a leader exit the test sends, and processes
//! that record what they were asked to do and end when the test says. Nothing is
//! spawned; time is paused, so a 30 s timeout passes at once and no test sleeps.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bashd_protocol::{
    BackgroundWhy, EndedBy, ExecResult, JobId, JobState, Killer, Notice, OnTimeout, Response,
    StreamName,
};
use rustix::process::{Pid, Signal};
use tokio::sync::{mpsc, oneshot, watch};

use super::{Control, Ended, JobMeta, JobRun, Report, Settings, Stop, StopReason, supervise};
use crate::config::OnStraggler;
use crate::jobs::contain::{JobProcesses, Leader};
use crate::jobs::os::reaper::LeaderExit;
use crate::jobs::os::spawn::Spawned;
use crate::output::{self, Shape};

const JOB: JobId = JobId(7);
const PID: u32 = 4242;
const TIMEOUT: Duration = Duration::from_secs(30);
const BACKGROUND_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// A job's processes as the test decides them.
#[derive(Clone)]
struct FakeJob {
    /// Shared by the test and the supervisor; a std mutex, held for a push or a take
    /// and never across an await.
    state: Arc<Mutex<FakeState>>,
    /// `true` once the last process has exited.
    gone: Arc<watch::Sender<bool>>,
}

struct FakeState {
    /// The leader's exit channel, until the leader "exits".
    exit: Option<oneshot::Sender<LeaderExit>>,
    /// Whether anything outlives the leader.
    stragglers: bool,
    /// Every `terminate` asked for: the signal, and whether the leader was unreaped.
    terminated: Vec<(Signal, Leader)>,
}

impl FakeJob {
    fn new(exit: oneshot::Sender<LeaderExit>) -> FakeJob {
        FakeJob {
            state: Arc::new(Mutex::new(FakeState {
                exit: Some(exit),
                stragglers: false,
                terminated: Vec::new(),
            })),
            gone: Arc::new(watch::channel(false).0),
        }
    }

    fn leader_exits(&self, exit: LeaderExit) {
        if let Some(sender) = self.state.lock().unwrap().exit.take() {
            let _ = sender.send(exit);
        }
    }

    /// The reaper went away without a status: the daemon is going down.
    fn reaper_gone(&self) {
        self.state.lock().unwrap().exit.take();
    }

    fn leave_stragglers(&self) {
        self.state.lock().unwrap().stragglers = true;
    }

    fn all_exit(&self) {
        self.gone.send_replace(true);
    }

    fn terminated(&self) -> Vec<(Signal, Leader)> {
        self.state.lock().unwrap().terminated.clone()
    }
}

impl JobProcesses for FakeJob {
    async fn outlived_leader(&self) -> bool {
        self.state.lock().unwrap().stragglers
    }

    async fn all_exited(&self) {
        let mut gone = self.gone.subscribe();
        let _ = gone.wait_for(|gone| *gone).await;
    }

    /// Every process dies of `signal` at once, the leader too if it still ran.
    async fn terminate(&self, signal: Signal, _grace: Duration, leader: Leader) {
        let exit = {
            let mut state = self.state.lock().unwrap();
            state.terminated.push((signal, leader));
            state.exit.take()
        };
        if let Some(exit) = exit {
            let _ = exit.send(LeaderExit::Signal(signal.as_raw()));
        }
        self.all_exit();
    }
}

/// One supervised fake job and every channel around it.
struct Harness {
    fake: FakeJob,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
    control: mpsc::UnboundedSender<Control>,
    responses: mpsc::Receiver<Response>,
    reports: mpsc::UnboundedReceiver<Report>,
    _dir: tempfile::TempDir,
}

fn settings(dir: &tempfile::TempDir) -> Settings {
    Settings {
        timeout: TIMEOUT,
        on_timeout: OnTimeout::Background,
        background_timeout: BACKGROUND_TIMEOUT,
        on_straggler: OnStraggler::Background,
        kill_grace: Duration::from_secs(2),
        limits: output::Limits {
            max_lines: 2000,
            max_bytes: 51_200,
            max_spill_bytes: 100 << 20,
        },
        shape: Shape::default(),
        session_dir: dir.path().to_owned(),
        detached: false,
        spill_budget: None,
        sandbox: None,
        deny_read: Vec::new(),
        start_notices: Vec::new(),
        answer_by: None,
    }
}

/// Starts a supervisor on a fake job with the default settings, changed by `change`.
fn start(change: impl FnOnce(&mut Settings)) -> Harness {
    let (stdout_read, stdout_write) = rustix::pipe::pipe().unwrap();
    let (stderr_read, stderr_write) = rustix::pipe::pipe().unwrap();
    let (exit_tx, exit) = oneshot::channel();
    let fake = FakeJob::new(exit_tx);
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings(&dir);
    change(&mut settings);
    let run = JobRun {
        activity: Default::default(),
        meta: JobMeta {
            job: JOB,
            session: "s".to_owned(),
            description: None,
            workdir: "/".to_owned(),
            started: Instant::now(),
        },
        spawned: Spawned {
            pid: Pid::from_raw(PID as i32).unwrap(),
            stdout: stdout_read,
            stderr: Some(stderr_read),
            exit,
            start_time: 0,
            held: None,
            stdin: None,
            pty: None,
            in_network: None,
        },
        processes: fake.clone(),
        settings,
        subscriber: None,
        watch: None,
        root: PID,
    };
    let (control, control_rx) = mpsc::unbounded_channel();
    let (events, responses) = mpsc::channel(64);
    let (reports_tx, reports) = mpsc::unbounded_channel();
    tokio::spawn(supervise(run, control_rx, events, reports_tx));
    Harness {
        fake,
        stdout: Some(stdout_write),
        stderr: Some(stderr_write),
        control,
        responses,
        reports,
        _dir: dir,
    }
}

impl Harness {
    fn write(&self, text: &str) {
        let pipe = self.stdout.as_ref().expect("stdout is open");
        rustix::io::write(pipe, text.as_bytes()).unwrap();
    }

    fn write_stderr(&self, text: &str) {
        let pipe = self.stderr.as_ref().expect("stderr is open");
        rustix::io::write(pipe, text.as_bytes()).unwrap();
    }

    /// A snapshot of the output once it holds `stdout` and `stderr` lines: the
    /// supervisor may answer a look before it reads what was written.
    async fn snapshot_with(&self, stdout: u64, stderr: u64) -> super::Streams {
        loop {
            let (reply, answer) = oneshot::channel();
            self.control.send(Control::Snapshot(reply)).unwrap();
            let streams = answer.await.unwrap();
            let err = streams.stderr.as_ref().map_or(0, |s| s.total_lines);
            if (streams.stdout.total_lines, err) == (stdout, stderr) {
                return streams;
            }
            // Not a sleep: paused time would run to the job's timeout.
            tokio::task::yield_now().await;
        }
    }

    /// The job's last holders of its pipes are gone.
    fn close_pipes(&mut self) {
        self.stdout = None;
        self.stderr = None;
    }

    fn stop(&self, reason: StopReason, signal: Signal) {
        let stop = Stop {
            reason,
            signal,
            grace: Duration::from_secs(2),
        };
        self.control.send(Control::Stop(stop)).unwrap();
    }

    /// The request's answer.
    async fn answer(&mut self) -> ExecResult {
        match self.responses.recv().await {
            Some(Response::Finished(result)) => *result,
            other => panic!("expected Finished, got {other:?}"),
        }
    }

    async fn report(&mut self) -> Report {
        self.reports.recv().await.expect("a report")
    }

    async fn ended(&mut self) -> Ended {
        match self.report().await {
            Report::Ended(ended) => *ended,
            other => panic!("expected Ended, got {other:?}"),
        }
    }

    /// The requester hears nothing more: the supervisor is gone.
    async fn no_more_answers(&mut self) {
        if let Some(response) = self.responses.recv().await {
            panic!("the request was answered again: {response:?}");
        }
    }
}

fn background(why: BackgroundWhy, timeout_secs: Option<u64>) -> Notice {
    Notice::Background {
        job: JOB,
        pid: PID,
        why,
        timeout_secs,
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_that_exits_0_answers_finished_with_its_output() {
    let mut job = start(|_| {});
    job.write("hello\n");
    job.close_pipes();
    job.fake.leader_exits(LeaderExit::Code(0));
    let result = job.answer().await;
    assert_eq!(result.state, JobState::Exited);
    assert_eq!((result.exit_code, result.signal), (Some(0), None));
    assert_eq!(result.stdout.text, "hello\n");
    assert!(!result.backgrounded);
    assert_eq!(result.notices, []);
    let record = result.record.clone().expect("an ended job has a record");
    assert_eq!((record.ended_by, record.killed_by), (EndedBy::Exit, None));
    // The job table heard of the end before the requester.
    match job.reports.try_recv() {
        Ok(Report::Ended(ended)) => assert_eq!(ended.result, result),
        other => panic!("expected Ended first, got {other:?}"),
    }
    assert_eq!(job.fake.terminated(), []);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_with_on_timeout_background_answers_running_and_the_job_goes_on() {
    let mut job = start(|_| {});
    job.write("first\n");
    let answer = job.answer().await;
    assert_eq!(answer.state, JobState::Running);
    assert!(answer.backgrounded);
    assert_eq!(answer.stdout.text, "first\n");
    assert_eq!(
        answer.notices,
        [background(BackgroundWhy::Timeout, Some(TIMEOUT.as_secs()))]
    );
    match job.report().await {
        Report::Backgrounded { job: id, seen } => assert_eq!((id, seen), (JOB, [1, 0])),
        other => panic!("expected Backgrounded, got {other:?}"),
    }

    // It runs on, and its output is still read.
    let (reply, snapshot) = oneshot::channel();
    job.control.send(Control::Snapshot(reply)).unwrap();
    assert_eq!(snapshot.await.unwrap().stdout.total_lines, 1);
    job.write("second\n");
    job.close_pipes();
    job.fake.leader_exits(LeaderExit::Code(0));
    let ended = job.ended().await;
    assert_eq!(ended.result.state, JobState::Exited);
    assert_eq!(ended.result.exit_code, Some(0));
    assert!(ended.result.backgrounded);
    assert_eq!(
        ended.streams.stdout.total_lines, 2,
        "{:?} {:?}",
        ended.result.stdout, ended.streams.stdout
    );
    job.no_more_answers().await;
    assert_eq!(job.fake.terminated(), []);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_with_on_timeout_kill_terminates_every_process() {
    let mut job = start(|settings| settings.on_timeout = OnTimeout::Kill);
    let result = job.answer().await;
    assert_eq!(result.state, JobState::TimedOut);
    assert_eq!(
        (result.exit_code, result.signal),
        (None, Some(Signal::TERM.as_raw()))
    );
    assert_eq!(
        result.notices,
        [Notice::TimedOut {
            after_secs: TIMEOUT.as_secs()
        }]
    );
    assert_eq!(job.fake.terminated(), [(Signal::TERM, Leader::Unreaped)]);
}

#[tokio::test(start_paused = true)]
async fn a_kill_while_the_leader_runs_ends_the_job_killed_with_the_signal_asked_for() {
    let mut job = start(|_| {});
    job.stop(StopReason::Killed(Killer::Agent), Signal::INT);
    let result = job.answer().await;
    assert_eq!(result.state, JobState::Killed);
    assert_eq!(result.signal, Some(Signal::INT.as_raw()));
    assert_eq!(result.notices, []);
    let record = result.record.expect("an ended job has a record");
    assert_eq!(
        (record.ended_by, record.killed_by),
        (EndedBy::Kill, Some(Killer::Agent))
    );
    assert_eq!(job.fake.terminated(), [(Signal::INT, Leader::Unreaped)]);
}

#[tokio::test(start_paused = true)]
async fn a_second_stop_changes_nothing() {
    let mut job = start(|_| {});
    job.stop(StopReason::Killed(Killer::Agent), Signal::TERM);
    job.stop(StopReason::Shutdown, Signal::TERM);
    let result = job.answer().await;
    assert_eq!(result.state, JobState::Killed);
    assert_eq!(result.notices, []);
    assert_eq!(job.fake.terminated(), [(Signal::TERM, Leader::Unreaped)]);
}

#[tokio::test(start_paused = true)]
async fn processes_the_shell_left_move_the_job_to_the_background_until_the_last_exits() {
    let mut job = start(|_| {});
    job.fake.leave_stragglers();
    job.write("server up\n");
    // The server holds the pipes: the answer comes after a short drain anyway.
    job.fake.leader_exits(LeaderExit::Code(0));
    let answer = job.answer().await;
    assert_eq!(answer.state, JobState::Running);
    assert_eq!(answer.exit_code, Some(0));
    assert_eq!(answer.stdout.text, "server up\n");
    assert_eq!(
        answer.notices,
        [background(BackgroundWhy::Stragglers, None)]
    );
    assert!(matches!(job.report().await, Report::Backgrounded { .. }));

    job.close_pipes();
    job.fake.all_exit();
    let ended = job.ended().await;
    assert_eq!(ended.result.state, JobState::Exited);
    assert_eq!(ended.result.exit_code, Some(0));
    assert!(ended.result.backgrounded);
    job.no_more_answers().await;
    assert_eq!(job.fake.terminated(), []);
}

#[tokio::test(start_paused = true)]
async fn on_straggler_kill_ends_what_the_shell_left_and_keeps_its_status() {
    let mut job = start(|settings| settings.on_straggler = OnStraggler::Kill);
    job.fake.leave_stragglers();
    job.fake.leader_exits(LeaderExit::Code(0));
    let result = job.answer().await;
    assert_eq!(result.state, JobState::Exited);
    assert_eq!(result.exit_code, Some(0));
    assert!(!result.backgrounded);
    assert_eq!(result.notices, [Notice::StragglersKilled {}]);
    // The leader was reaped: its group id is not signalled.
    assert_eq!(job.fake.terminated(), [(Signal::TERM, Leader::Reaped)]);
}

/// Stragglers in the background go by the background limit, not the foreground timeout
/// the command started with.
#[tokio::test(start_paused = true)]
async fn stragglers_are_killed_at_the_background_timeout() {
    let begun = tokio::time::Instant::now();
    let mut job = start(|_| {});
    job.fake.leave_stragglers();
    job.fake.leader_exits(LeaderExit::Code(0));
    assert_eq!(job.answer().await.state, JobState::Running);
    let ended = job.ended_after_backgrounded().await;
    assert_eq!(ended.result.state, JobState::TimedOut);
    assert!(
        begun.elapsed() >= BACKGROUND_TIMEOUT,
        "killed after {:?}, before the background limit",
        begun.elapsed()
    );
    assert_eq!(
        ended.result.notices,
        [Notice::TimedOut {
            after_secs: BACKGROUND_TIMEOUT.as_secs()
        }]
    );
    assert_eq!(job.fake.terminated(), [(Signal::TERM, Leader::Reaped)]);
}

#[tokio::test(start_paused = true)]
async fn a_job_moved_by_its_timeout_ends_at_the_background_timeout() {
    let mut job = start(|_| {});
    assert_eq!(job.answer().await.state, JobState::Running);
    let ended = job.ended_after_backgrounded().await;
    assert_eq!(ended.result.state, JobState::TimedOut);
    assert_eq!(
        ended.result.notices,
        [Notice::TimedOut {
            after_secs: BACKGROUND_TIMEOUT.as_secs()
        }]
    );
    assert_eq!(job.fake.terminated(), [(Signal::TERM, Leader::Unreaped)]);
}

#[tokio::test(start_paused = true)]
async fn a_requester_that_goes_away_stops_a_foreground_job() {
    let mut job = start(|_| {});
    let (_, closed) = mpsc::channel(1);
    drop(std::mem::replace(&mut job.responses, closed));
    let ended = job.ended().await;
    assert_eq!(ended.result.state, JobState::Killed);
    assert_eq!(job.fake.terminated(), [(Signal::TERM, Leader::Unreaped)]);
}

#[tokio::test(start_paused = true)]
async fn mode_background_answers_at_once_and_keeps_no_lines_from_the_checks() {
    let mut job = start(|settings| settings.detached = true);
    let answer = job.answer().await;
    assert_eq!(answer.state, JobState::Running);
    assert_eq!(answer.exit_code, None);
    assert_eq!(answer.notices, [background(BackgroundWhy::Requested, None)]);
    match job.report().await {
        Report::Backgrounded { seen, .. } => assert_eq!(seen, [0, 0]),
        other => panic!("expected Backgrounded, got {other:?}"),
    }
    job.write("done\n");
    job.close_pipes();
    job.fake.leader_exits(LeaderExit::Code(3));
    let ended = job.ended().await;
    assert_eq!(ended.result.state, JobState::Exited);
    assert_eq!(ended.result.exit_code, Some(3));
    // A background job spills from its first byte.
    assert!(ended.result.stdout.full_output.is_some());
    job.no_more_answers().await;
}

#[tokio::test(start_paused = true)]
async fn a_leader_killed_by_a_signal_is_signaled() {
    let mut job = start(|_| {});
    job.close_pipes();
    job.fake
        .leader_exits(LeaderExit::Signal(Signal::SEGV.as_raw()));
    let result = job.answer().await;
    assert_eq!(result.state, JobState::Signaled);
    assert_eq!(result.signal, Some(Signal::SEGV.as_raw()));
}

#[tokio::test(start_paused = true)]
async fn a_reaper_gone_before_the_leader_ended_leaves_the_job_killed() {
    let mut job = start(|_| {});
    job.fake.reaper_gone();
    let result = job.answer().await;
    assert_eq!(result.state, JobState::Killed);
    assert_eq!((result.exit_code, result.signal), (None, None));
    assert_eq!(job.fake.terminated(), []);
}

impl Harness {
    /// Skips the `Backgrounded` report, then waits for the end.
    async fn ended_after_backgrounded(&mut self) -> Ended {
        assert!(matches!(self.report().await, Report::Backgrounded { .. }));
        self.ended().await
    }
}

/// Issue 15: an MCP call's budget answers the request with the job still running;
/// the job's own timeout still holds, and then goes by `on_timeout` as for a
/// foreground job.
#[tokio::test(start_paused = true)]
async fn the_answer_by_of_a_call_moves_the_job_to_the_background_and_its_timeout_still_holds() {
    let budget = Duration::from_secs(3);
    let mut job = start(|settings| {
        settings.answer_by = Some(budget);
        settings.on_timeout = OnTimeout::Kill;
    });
    job.write("first\n");
    let started = tokio::time::Instant::now();
    let answer = job.answer().await;
    // The job's start is a std instant, a moment before the paused clock's, and its
    // end waits out the drain of its last output.
    let about = |d: Duration| (d..d + Duration::from_millis(500)).contains(&started.elapsed());
    assert!(about(budget), "{:?}", started.elapsed());
    assert_eq!(answer.state, JobState::Running);
    assert!(answer.backgrounded);
    assert_eq!(answer.stdout.text, "first\n");
    assert_eq!(
        answer.notices,
        [background(BackgroundWhy::CallBudget, Some(3))]
    );
    match job.report().await {
        Report::Backgrounded { seen, .. } => assert_eq!(seen, [1, 0]),
        other => panic!("expected Backgrounded, got {other:?}"),
    }
    // The job's timeout kills it, as on_timeout says.
    let ended = job.ended().await;
    assert!(about(TIMEOUT), "{:?}", started.elapsed());
    assert_eq!(ended.result.state, JobState::TimedOut);
    assert_eq!(job.fake.terminated().len(), 1);
    job.no_more_answers().await;
}

/// Issue 15: a detach (a cancelled MCP call, `on_cancel = "background"`) answers the
/// request at once, and the job runs on to its end.
#[tokio::test(start_paused = true)]
async fn a_detach_answers_the_request_and_the_job_goes_on() {
    let mut job = start(|_| {});
    job.write("first\n");
    job.control
        .send(Control::Detach(BackgroundWhy::Cancelled))
        .unwrap();
    let answer = job.answer().await;
    assert_eq!(answer.state, JobState::Running);
    assert_eq!(answer.notices, [background(BackgroundWhy::Cancelled, None)]);
    job.close_pipes();
    job.fake.leader_exits(LeaderExit::Code(0));
    loop {
        match job.report().await {
            Report::Ended(ended) => {
                assert_eq!(ended.result.state, JobState::Exited);
                break;
            }
            Report::Backgrounded { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(job.fake.terminated(), []);
}

/// Which stream printed last is kept with the output, for `bashc top`'s LAST LINE
/// (issue 45): a request log on stderr after a banner on stdout, then stdout again.
#[tokio::test(start_paused = true)]
async fn the_stream_that_printed_last_is_kept() {
    let mut job = start(|_| {});
    job.write("banner\n");
    let streams = job.snapshot_with(1, 0).await;
    assert_eq!(streams.printed_last, StreamName::Stdout);
    job.write_stderr("GET /\n");
    let streams = job.snapshot_with(1, 1).await;
    assert_eq!(streams.printed_last, StreamName::Stderr);
    let last = streams.printed_last();
    assert_eq!((last.total_lines, last.total_bytes), (1, 6));
    job.write("ready\n");
    let streams = job.snapshot_with(2, 1).await;
    assert_eq!(streams.printed_last, StreamName::Stdout);
    job.close_pipes();
    job.fake.leader_exits(LeaderExit::Code(0));
    let ended = job.ended().await;
    assert_eq!(ended.streams.printed_last, StreamName::Stdout);
}
