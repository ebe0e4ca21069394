//! The actor that owns the job table and the sessions. It is the only place that
//! creates, lists, finds or forgets jobs and sessions; connections reach it through
//! [`JobsHandle`], supervisors and owner watchers report to it over channels, and it
//! never waits on any of them, nor on the reaper: a job's spawn is asked for by a task
//! of its own, whose answer comes back as a report (`Report::Spawned`) while the job
//! is `Starting`.

pub(super) mod asks;
pub(super) mod descriptors;
pub(super) mod handle;
pub(super) mod inbox;
pub(super) mod live;
pub(super) mod lost;
pub(super) mod queries;
pub(super) mod reach;
pub(super) mod session;
pub(super) mod sessions;
pub(super) mod start;
pub(super) mod watchers;

pub use lost::LostJob;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bashd_protocol::{
    ErrorHint, ErrorKind, ErrorReply, ExecResult, JobId, Mode, Response, runtime,
};
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::Config;
use crate::jobs::contain::Containment;
use crate::jobs::job::supervisor::{Control, Ended, JobMeta, Report, Settings, Stop, StopReason};
use crate::jobs::table::descriptors::DescriptorBudget;
use crate::jobs::table::handle::{Cmd, JobsHandle};
use crate::jobs::table::session::{Session, SessionEvent};
use crate::journal::Journal;
use crate::output;

/// A running job's age in ms: the time since its start. Every age a result, a wait
/// or a listing gives a job that runs is this one figure, from the job's `started`
/// (an ended job's is its duration, in its result), so that `wait`, `check`, `jobs`
/// and `top` agree (issue 45).
pub(in crate::jobs) fn age_ms(started: Instant) -> u64 {
    started.elapsed().as_millis() as u64
}

/// At most `max` bytes of `text`, cut on a char boundary: a command as listings show
/// it.
pub(in crate::jobs) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Identifies this daemon instance in job cookies (`BASHD_JOB=<instance>/<job>`).
pub fn new_instance_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{:x}-{:x}", std::process::id(), nanos)
}

pub struct JobsActor {
    /// The config in force, taken from `config_updates` before each event.
    pub(in crate::jobs) config: Arc<Config>,
    pub(in crate::jobs) config_updates: watch::Receiver<Arc<Config>>,
    pub(in crate::jobs) cmds: mpsc::Receiver<Cmd>,
    pub(in crate::jobs) reports_tx: mpsc::UnboundedSender<Report>,
    pub(in crate::jobs) reports: mpsc::UnboundedReceiver<Report>,
    pub(in crate::jobs) session_events_tx: mpsc::UnboundedSender<SessionEvent>,
    pub(in crate::jobs) session_events: mpsc::UnboundedReceiver<SessionEvent>,
    /// Where each job's processes come from, and how they are ended.
    pub(in crate::jobs) containment: Containment,
    /// Every job the table holds, by number (`j12` is 12).
    pub(in crate::jobs) jobs: HashMap<u64, Job>,
    /// Leader pid to job, for `--pid`; a reused pid names its newest job.
    pub(in crate::jobs) by_pid: HashMap<u32, u64>,
    pub(in crate::jobs) sessions: HashMap<String, Session>,
    pub(in crate::jobs) running: usize,
    /// Job starts and ends, and the job counter.
    pub(in crate::jobs) journal: Journal,
    pub(in crate::jobs) instance: String,
    pub(in crate::jobs) shell: PathBuf,
    pub(in crate::jobs) runtime_dir: PathBuf,
    pub(in crate::jobs) started: Instant,
    /// Whether another job fits under the open-file limit.
    pub(in crate::jobs) descriptors: DescriptorBudget,
    /// Bytes of spill files on disk, against the disk budgets.
    pub(in crate::jobs) spill_ledger: output::SpillLedger,
    /// Where sandboxed jobs' channels hand the connections sent over them: the
    /// server, which serves them beside its socket's.
    pub(in crate::jobs) arrivals: mpsc::Sender<crate::sandbox::channel::Arrived>,
    /// The first job number this daemon gave out: lower ones are an earlier daemon's.
    pub(in crate::jobs) first_job: u64,
    /// What each session's jobs did since its last call (issue 32).
    pub(in crate::jobs) inboxes: inbox::Inboxes,
    /// The open `watch` requests (`bashc top`), told which jobs changed.
    pub(in crate::jobs) watchers: watchers::Watchers,
    /// The asks waiting for a person, and the grants (issue 44).
    pub(in crate::jobs) asks: asks::Asks,
    /// bashd's proxy for `allow-list` jobs (issue 43), once the daemon made it: what
    /// serves each session's proxy port, and what status reports.
    pub(in crate::jobs) proxy: Option<crate::network::Proxy>,
    /// Where the person's tools fetch from, read off the startup path
    /// (`network/sources.rs`): shown by `status`, and a confined job's registries and
    /// caches. Empty until [`JobsActor::follow_tool_sources`] and the first reading.
    pub(in crate::jobs) tool_sources: watch::Receiver<Arc<crate::network::sources::ToolSources>>,
    /// The temp dirs and tool caches made for confined jobs, made once.
    pub(in crate::jobs) made_dirs: crate::sandbox::MadeDirs,
}

pub(in crate::jobs) struct Job {
    pub(in crate::jobs) id: JobId,
    pub(in crate::jobs) session: String,
    pub(in crate::jobs) command: String,
    pub(in crate::jobs) description: Option<String>,
    pub(in crate::jobs) workdir: String,
    pub(in crate::jobs) mode: Mode,
    pub(in crate::jobs) pid: Option<u32>,
    pub(in crate::jobs) started_at: SystemTime,
    pub(in crate::jobs) started: Instant,
    /// Its request was answered before it ended.
    pub(in crate::jobs) background: bool,
    /// Per session: lines of stdout and stderr that session's `check`s have shown.
    pub(in crate::jobs) cursors: HashMap<String, [u64; 2]>,
    /// Lines of an output page, and bytes of a check, when the request names none.
    pub(in crate::jobs) page_lines: u64,
    pub(in crate::jobs) max_bytes: usize,
    pub(in crate::jobs) status: Status,
    /// The first process of the job once it runs: its resident, or its shell on the
    /// scan path. Its processes are it and its descendants (`jobs/os/probe.rs`).
    pub(in crate::jobs) root: Option<u32>,
    /// The write end of its stdin pipe, while it runs with one (`--stdin pipe`).
    pub(in crate::jobs) stdin: Option<crate::jobs::job::stdin::StdinHandle>,
    pub(in crate::jobs) stdin_mode: bashd_protocol::StdinMode,
    /// The sandbox it runs in, when it is confined.
    pub(in crate::jobs) sandbox: Option<bashd_protocol::SandboxInForce>,
    /// Its writable roots, when it is confined (`sandbox/roots.rs`): a sandboxed job
    /// reaches it only if they are within its own.
    pub(in crate::jobs) roots: Option<Arc<crate::sandbox::roots::Roots>>,
    /// The daemon's end of its channel (`sandbox/channel.rs`), while a sandboxed job
    /// runs: dropped when it ends, which closes the channel and the connections that
    /// came through it.
    pub(in crate::jobs) channel: Option<crate::sandbox::channel::Channel>,
    /// Its count in its session network while it runs (`sandbox/network.rs`).
    pub(in crate::jobs) in_network: Option<crate::sandbox::network::InNetwork>,
    /// What its session asked to be told about it (`--notify`, `--notify-idle`).
    pub(in crate::jobs) notify: Option<crate::jobs::job::teller::Spec>,
}

/// Where a job is in its life, as the table sees it.
pub(in crate::jobs) enum Status {
    /// Its shell is being spawned. Stops sent meanwhile wait in `control` until its
    /// supervisor starts; `jobs` lists it as running, without a pid.
    Starting {
        control: mpsc::UnboundedSender<Control>,
        /// `wait` and `kill` requests, answered when the job ends.
        waiters: Vec<oneshot::Sender<ExecResult>>,
        launch: Box<Launch>,
    },
    Running {
        control: mpsc::UnboundedSender<Control>,
        /// `wait` and `kill` requests, answered when the job ends.
        waiters: Vec<oneshot::Sender<ExecResult>>,
        /// Counts the supervisor's reads that brought output (`JobRun::activity`).
        activity: Arc<std::sync::atomic::AtomicU64>,
    },
    Ended(Box<Ended>),
}

/// What a starting job's supervisor will need, kept until the reaper's answer.
pub(in crate::jobs) struct Launch {
    /// The request's responses.
    pub(in crate::jobs) events: mpsc::Sender<Response>,
    pub(in crate::jobs) control: mpsc::UnboundedReceiver<Control>,
    pub(in crate::jobs) settings: Settings,
    /// `BASHD_JOB=...`, as its environment has it.
    pub(in crate::jobs) cookie: Vec<u8>,
    /// Its stderr goes to its stdout pipe.
    pub(in crate::jobs) merged: bool,
    /// The whole command, for the log.
    pub(in crate::jobs) command: String,
    /// A reader of its output from the first line (`exec --stream`).
    pub(in crate::jobs) subscriber: Option<crate::jobs::job::supervisor::Subscriber>,
}

impl Job {
    /// The channel to its supervisor, once it has one or is about to.
    pub(in crate::jobs) fn control(&self) -> Option<&mpsc::UnboundedSender<Control>> {
        match &self.status {
            Status::Starting { control, .. } | Status::Running { control, .. } => Some(control),
            Status::Ended(_) => None,
        }
    }

    pub(in crate::jobs) fn meta(&self) -> JobMeta {
        JobMeta {
            job: self.id,
            session: self.session.clone(),
            description: self.description.clone(),
            workdir: self.workdir.clone(),
            started: self.started,
        }
    }
}

/// What the actor reacts to.
enum Event {
    Cmd(Cmd),
    Report(Report),
    Session(SessionEvent),
}

impl JobsActor {
    pub fn new(
        config_updates: watch::Receiver<Arc<Config>>,
        instance: String,
        containment: Containment,
        shell: PathBuf,
        runtime_dir: PathBuf,
        journal: Journal,
        arrivals: mpsc::Sender<crate::sandbox::channel::Arrived>,
    ) -> (JobsActor, JobsHandle) {
        let (cmd_tx, cmds) = mpsc::channel(256);
        // Unbounded so a supervisor or a watcher never waits on the actor; there are at
        // most two reports per job and one event per owner or linger.
        let (reports_tx, reports) = mpsc::unbounded_channel();
        let (session_events_tx, session_events) = mpsc::unbounded_channel();
        let inboxes = inbox::Inboxes::new();
        let inbox_pending = inboxes.non_empty();
        let actor = JobsActor {
            config: Arc::clone(&config_updates.borrow()),
            config_updates: config_updates.clone(),
            cmds,
            reports_tx,
            reports,
            session_events_tx,
            session_events,
            containment,
            jobs: HashMap::new(),
            by_pid: HashMap::new(),
            sessions: HashMap::new(),
            running: 0,
            first_job: journal.next(),
            journal,
            instance,
            shell,
            runtime_dir,
            started: Instant::now(),
            descriptors: DescriptorBudget::new(),
            spill_ledger: output::SpillLedger::default(),
            made_dirs: crate::sandbox::MadeDirs::default(),
            arrivals,
            inboxes,
            watchers: Default::default(),
            asks: Default::default(),
            proxy: None,
            tool_sources: watch::channel(Arc::default()).1,
        };
        (
            actor,
            JobsHandle {
                cmds: cmd_tx,
                config: config_updates,
                origin: None,
                caller_dir: Arc::new(crate::sandbox::roots::CallerDir::Unknown),
                peer_pid: None,
                stop: tokio_util::sync::CancellationToken::new(),
                inbox_pending,
            },
        )
    }

    /// Gives the actor the daemon's proxy, before it runs.
    pub fn set_proxy(&mut self, proxy: crate::network::Proxy) {
        self.proxy = Some(proxy);
    }

    /// Takes the tool sources from `sources` from now on (`network::sources::follow`).
    pub fn follow_tool_sources(
        &mut self,
        sources: watch::Receiver<Arc<crate::network::sources::ToolSources>>,
    ) {
        self.tool_sources = sources;
    }

    pub async fn run(mut self) {
        loop {
            // Cancelling any branch loses nothing: all three are channel receives.
            // Reports come first: a supervisor reports a job's end or move before it
            // answers the request, and a command sent on that answer must see it.
            let event = tokio::select! {
                biased;
                Some(report) = self.reports.recv() => Event::Report(report),
                Some(event) = self.session_events.recv() => Event::Session(event),
                cmd = self.cmds.recv() => match cmd {
                    Some(cmd) => Event::Cmd(cmd),
                    None => break,
                },
            };
            if self.config_updates.has_changed().unwrap_or(false) {
                self.config = Arc::clone(&self.config_updates.borrow_and_update());
            }
            match event {
                Event::Cmd(Cmd::Shutdown { reply }) => {
                    self.stop_all().await;
                    let _ = reply.send(());
                    break;
                }
                Event::Cmd(cmd) => self.command(cmd),
                Event::Report(report) => self.report(report),
                Event::Session(event) => self.session_event(event),
            }
        }
        self.stop_all().await;
        // Later requests find the channel closed and are told the daemon is stopping;
        // those already sent are told here.
        self.cmds.close();
        while let Some(cmd) = self.cmds.recv().await {
            cmd.refuse();
        }
    }

    fn command(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Call(message) => message.handle(self),
            // Handled by `run`, which ends the loop.
            Cmd::Shutdown { reply } => {
                let _ = reply.send(());
            }
        }
    }

    pub(in crate::jobs) fn report(&mut self, report: Report) {
        match report {
            Report::Backgrounded { job, seen } => {
                if let Some(job) = self.jobs.get_mut(&job.0) {
                    job.background = true;
                    job.cursors.insert(job.session.clone(), seen);
                }
                self.watchers.touch(job.0);
                self.start_teller(job.0, seen);
            }
            Report::Ended(ended) => self.ended(*ended),
            Report::Tell { session, event } => {
                if self.sessions.contains_key(&session) {
                    self.inboxes.tell(&session, event);
                }
            }
            Report::Spawned { job, spawned } => self.spawned(job, spawned),
            Report::AskExpired(ask) => self.ask_expired(ask),
        }
    }

    pub(in crate::jobs) fn ended(&mut self, ended: Ended) {
        let result = &ended.result;
        tracing::info!(
            job = %result.job,
            session = %result.session,
            state = %result.state,
            exit_code = ?result.exit_code,
            signal = ?result.signal,
            duration_ms = result.duration_ms,
            "job ended"
        );
        let n = result.job.0;
        self.watchers.touch(n);
        self.journal_end(n);
        self.tell_ended(n, &ended);
        let Some(job) = self.jobs.get_mut(&n) else {
            return;
        };
        if !job.background {
            // The request that started it showed its output; checks start after it.
            let seen = [
                ended.streams.stdout.complete_lines,
                ended
                    .streams
                    .stderr
                    .as_ref()
                    .map_or(0, |s| s.complete_lines),
            ];
            job.cursors.insert(job.session.clone(), seen);
        }
        // Its stdin pipe closes with it, and its channel: nothing speaks for it now.
        job.stdin = None;
        job.channel = None;
        job.in_network = None;
        let files = spill_files(&ended.streams);
        self.spill_ledger.finished(&job.session, n, files, None);
        let status = std::mem::replace(&mut job.status, Status::Ended(Box::new(ended)));
        if let (
            Status::Starting { waiters, .. } | Status::Running { waiters, .. },
            Status::Ended(ended),
        ) = (status, &job.status)
        {
            for waiter in waiters {
                let _ = waiter.send(ended.result.clone());
            }
            self.running -= 1;
        }
        let name = job.session.clone();
        let Some(session) = self.sessions.get_mut(&name) else {
            return;
        };
        session.running -= 1;
        let closed = session.closing.is_some() && session.running == 0;
        self.mark_finished(&name, n);
        if closed {
            self.finish_close(&name);
        }
    }

    /// Records in the journal that job `n` is over; a failure only costs a restart a
    /// look for processes that are not there.
    pub(in crate::jobs) fn journal_end(&mut self, n: u64) {
        if let Err(e) = self.journal.end(n) {
            tracing::warn!(
                job = n,
                "cannot record the end of a job in the journal: {e}"
            );
        }
    }

    /// Drops a finished job and its spill files.
    pub(in crate::jobs) fn forget(&mut self, n: u64) {
        let Some(job) = self.jobs.remove(&n) else {
            return;
        };
        self.watchers.touch(n);
        if let Status::Ended(ended) = &job.status
            && ended.result.state == bashd_protocol::JobState::Lost
        {
            // Kept in the journal until now, so another crash kept it too.
            self.journal_end(n);
        }
        if let Some(session) = self.sessions.get_mut(&job.session) {
            session.jobs.remove(&n);
        }
        self.spill_ledger.forget(&job.session, n);
        if let Some(pid) = job.pid
            && self.by_pid.get(&pid) == Some(&n)
        {
            self.by_pid.remove(&pid);
        }
        if let Status::Ended(ended) = &job.status {
            let streams = [Some(&ended.streams.stdout), ended.streams.stderr.as_ref()];
            for source in streams.into_iter().flatten() {
                if let output::Content::File { path, .. } = &source.content {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }

    /// The session's network of setting `network`, made on first use; `None` for a
    /// session the table does not hold.
    pub(in crate::jobs) fn session_network(
        &mut self,
        name: &str,
        network: bashd_protocol::Network,
    ) -> Option<std::sync::Arc<crate::sandbox::network::SessionNetwork>> {
        let session = self.sessions.get_mut(name)?;
        let proxy = self.proxy.clone();
        let entry = session.networks.entry(network).or_insert_with(|| {
            std::sync::Arc::new(crate::sandbox::network::SessionNetwork::new(
                name, network, proxy,
            ))
        });
        Some(std::sync::Arc::clone(entry))
    }

    pub(in crate::jobs) fn session_dir(&self, name: &str) -> PathBuf {
        runtime::sessions_dir(&self.runtime_dir).join(name)
    }

    /// Stops every running job (a starting one as soon as it starts), waits until each
    /// supervisor has reported its end, and removes every session's directory.
    async fn stop_all(&mut self) {
        let grace = self.config.timeouts.kill_grace;
        for control in self.jobs.values().filter_map(Job::control) {
            let _ = control.send(Control::Stop(Stop::term(StopReason::Shutdown, grace)));
        }
        while self.running > 0 {
            match self.reports.recv().await {
                Some(report) => self.report(report),
                None => break,
            }
        }
        let names: Vec<String> = self.sessions.keys().cloned().collect();
        for name in names {
            self.close_session(&name, None);
        }
        // Every job has ended: what is left is the counter.
        if let Err(e) = self.journal.compact() {
            tracing::warn!("cannot compact the journal: {e}");
        }
    }
}

/// The spill files of a job's streams.
fn spill_files(streams: &crate::jobs::job::supervisor::Streams) -> Vec<PathBuf> {
    [Some(&streams.stdout), streams.stderr.as_ref()]
        .into_iter()
        .flatten()
        .filter_map(|source| match &source.content {
            output::Content::File { path, .. } => Some(path.clone()),
            output::Content::Memory(_) => None,
        })
        .collect()
}

/// The error for a session the daemon does not have.
pub(in crate::jobs) fn unknown_session(name: &str) -> ErrorReply {
    ErrorReply::new(ErrorKind::NotFound, format!("no session {name}"))
        .with_hint(ErrorHint::Sessions)
}
