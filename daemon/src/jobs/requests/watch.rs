//! `watch` (`bashc top`'s view, issue 32): every session's jobs, then only what changed,
//! for as long as the view is open, so that a view redraws from events instead of
//! asking for the whole table every second (which read /proc for every running job).
//!
//! The actor tells each open watch which jobs changed (started, moved to the
//! background, ended, forgotten: [`Watchers::touch`](crate::jobs::table::watchers::Watchers::touch), one set insert per watch); a
//! running job's supervisor counts its reads that brought output (`JobRun::activity`).
//! The watch's task wakes every [`TICK`], and sends one `Changed` with the rows of the
//! jobs the actor named, of those whose output moved (their last line, read from a
//! snapshot at most every [`LAST_LINE_EVERY`] per job), and of those with a stdin
//! that started or stopped waiting for input (looked at every [`PROBE_EVERY`]). So a
//! flood of output costs one snapshot per job per second, whatever its rate, and an
//! idle table costs a look at one counter per running job per tick.
//!
//! CPU, memory and ports are not watched: a view asks `Top` for the rows it shows.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bashd_protocol::{
    ErrorReply, JobId, JobInfo, JobsRequest, RequestId, Response, ServerFrame, TopJob,
    WatchRequest, WatchUpdate,
};
use tokio::sync::{mpsc, oneshot};

use crate::jobs::job::supervisor::Control;
use crate::jobs::requests::top::last_line;
use crate::jobs::table::handle::{JobsHandle, ToActor, blocking, shutting_down};
use crate::jobs::table::queries::waiting_for_input;
use crate::jobs::table::watchers::Watcher;
use crate::jobs::table::{JobsActor, Status};
use crate::outbound::Outbound;
use crate::sandbox::channel::Origin;

/// How often a watch sends what changed, at most.
const TICK: Duration = Duration::from_millis(250);
/// How often one job's last line is read again, at most, while it prints.
const LAST_LINE_EVERY: Duration = Duration::from_secs(1);
/// How often jobs with a stdin are asked whether they wait for input.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// Streams the table and its changes to `out` until the connection cancels the
/// request or goes away.
pub(super) async fn serve(id: RequestId, request: WatchRequest, jobs: JobsHandle, out: Outbound) {
    let send = |update| out.send(ServerFrame::Response(id, Response::Watch(update)));
    let origin = jobs.origin.clone();
    let opened = jobs
        .call(Open {
            caller: request.caller,
            origin: origin.clone(),
        })
        .await
        .and_then(|opened| opened);
    let (watcher, table) = match opened {
        Ok(opened) => opened,
        Err(error) => {
            let _ = out
                .send(ServerFrame::Response(id, Response::Error(error)))
                .await;
            return;
        }
    };
    let mut view = View::default();
    let mut numbers = Vec::with_capacity(table.len());
    for (info, live) in table {
        numbers.push(info.job.0);
        view.rows.insert(info.job.0, Row::new(info, live));
    }
    view.look(numbers.iter().copied().collect(), true).await;
    let rows = numbers
        .iter()
        .filter_map(|n| view.rows.get(n))
        .map(Row::top)
        .collect();
    if send(WatchUpdate::Table(rows)).await.is_err() {
        return;
    }
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut probed = Instant::now();
    loop {
        // Cancelling either branch loses nothing. The actor closes its channel once it
        // has stopped every job: the watch ends then, so that it does not hold up the
        // daemon's stop, which waits for its connections' requests.
        tokio::select! {
            _ = tick.tick() => {}
            () = jobs.cmds.closed() => {
                let stopping = Response::Error(shutting_down());
                let _ = out.send(ServerFrame::Response(id, stopping)).await;
                return;
            }
        }
        let touched: Vec<u64> = watcher.take().into_iter().collect();
        let mut changed: HashSet<u64> = HashSet::new();
        let mut gone = Vec::new();
        if !touched.is_empty() {
            let Ok(now) = jobs
                .call(Rows {
                    numbers: touched,
                    origin: origin.clone(),
                })
                .await
            else {
                return;
            };
            for (n, row) in now {
                match row {
                    Some((info, live)) => {
                        view.update(n, info, live);
                        changed.insert(n);
                    }
                    None => {
                        if view.rows.remove(&n).is_some() {
                            gone.push(JobId(n));
                        }
                    }
                }
            }
        }
        let probe = probed.elapsed() >= PROBE_EVERY;
        if probe {
            probed = Instant::now();
        }
        let mut look = view.moved();
        look.extend(changed.iter().copied());
        changed.extend(view.look(look, probe).await);
        if changed.is_empty() && gone.is_empty() {
            continue;
        }
        let mut rows: Vec<TopJob> = changed
            .iter()
            .filter_map(|n| view.rows.get(n))
            .map(Row::top)
            .collect();
        rows.sort_by_key(|row| row.info.job.0);
        if send(WatchUpdate::Changed { rows, gone }).await.is_err() {
            return;
        }
    }
}

/// A running job as a watch looks at it.
#[derive(Debug, Clone)]
struct LiveParts {
    control: mpsc::UnboundedSender<Control>,
    /// Its supervisor, when it has a stdin and so may wait for input.
    probe: Option<mpsc::UnboundedSender<Control>>,
    activity: Arc<AtomicU64>,
}

/// The message: open a watch, as `origin` (a sandboxed job) may see the table; the
/// answer is every job it may see, in order.
struct Open {
    caller: bashd_protocol::Caller,
    origin: Option<Arc<Origin>>,
}

type Table = Vec<(JobInfo, Option<LiveParts>)>;

impl ToActor for Open {
    type Reply = Result<(Arc<Watcher>, Table), ErrorReply>;
    fn handle(self, actor: &mut JobsActor) -> Self::Reply {
        let request = JobsRequest {
            caller: self.caller,
            session: None,
        };
        let listed = actor.list(request, self.origin.as_deref())?;
        let watcher = actor.watchers.open();
        let table = listed
            .into_iter()
            .map(|info| {
                let live = actor.live_parts(info.job.0);
                (info, live)
            })
            .collect();
        Ok((watcher, table))
    }
}

/// The message: these jobs as they are now; `None` for one no longer kept (or that
/// `origin` may not see).
struct Rows {
    numbers: Vec<u64>,
    origin: Option<Arc<Origin>>,
}

impl ToActor for Rows {
    type Reply = Vec<(u64, Option<(JobInfo, Option<LiveParts>)>)>;
    fn handle(self, actor: &mut JobsActor) -> Self::Reply {
        self.numbers
            .into_iter()
            .map(|n| {
                let row = actor
                    .jobs
                    .get(&n)
                    .filter(|job| actor.listed_to(job, self.origin.as_deref()))
                    .map(|job| (actor.info(job), actor.live_parts(n)));
                (n, row)
            })
            .collect()
    }
}

impl JobsActor {
    fn live_parts(&self, n: u64) -> Option<LiveParts> {
        let job = self.jobs.get(&n)?;
        let Status::Running {
            control, activity, ..
        } = &job.status
        else {
            return None;
        };
        Some(LiveParts {
            control: control.clone(),
            probe: job.stdin.as_ref().map(|_| control.clone()),
            activity: Arc::clone(activity),
        })
    }
}

/// What a watch knows of every job it shows.
#[derive(Default)]
struct View {
    rows: HashMap<u64, Row>,
}

struct Row {
    info: JobInfo,
    live: Option<LiveParts>,
    /// The job's output count when its last line was read, and when.
    read_at: Option<(u64, Instant)>,
    last_line: Option<String>,
    prompt: Option<String>,
}

impl Row {
    fn new(info: JobInfo, live: Option<LiveParts>) -> Row {
        Row {
            info,
            live,
            read_at: None,
            last_line: None,
            prompt: None,
        }
    }

    fn top(&self) -> TopJob {
        TopJob {
            info: self.info.clone(),
            cpu_ms: None,
            rss_bytes: None,
            prompt: self.prompt.clone(),
            last_line: self.last_line.clone(),
        }
    }
}

impl View {
    fn update(&mut self, n: u64, info: JobInfo, live: Option<LiveParts>) {
        let row = self
            .rows
            .entry(n)
            .or_insert_with(|| Row::new(info.clone(), None));
        let waiting = row.info.waiting_for_input;
        row.info = info;
        // Whether it waits is the watch's to say, not the listing's (which does not look).
        row.info.waiting_for_input = waiting && live.is_some();
        if live.is_none() {
            row.prompt = None;
        }
        row.live = live;
    }

    /// The running jobs whose output moved since their last line was read, and whose
    /// last read is old enough to read again.
    fn moved(&self) -> HashSet<u64> {
        self.rows
            .iter()
            .filter(|(_, row)| {
                let Some(live) = &row.live else { return false };
                let count = live.activity.load(Ordering::Relaxed);
                match row.read_at {
                    Some((seen, at)) => seen != count && at.elapsed() >= LAST_LINE_EVERY,
                    None => count > 0,
                }
            })
            .map(|(n, _)| *n)
            .collect()
    }

    /// Reads the last line of the jobs in `numbers` that run, and, with `probe`,
    /// whether every running job with a stdin waits for input; returns the jobs whose
    /// row changed.
    async fn look(&mut self, numbers: HashSet<u64>, probe: bool) -> HashSet<u64> {
        let mut changed = HashSet::new();
        let mut snapshots = Vec::new();
        for n in &numbers {
            let Some(row) = self.rows.get_mut(n) else {
                continue;
            };
            let Some(live) = &row.live else { continue };
            row.read_at = Some((live.activity.load(Ordering::Relaxed), Instant::now()));
            let (reply, answer) = oneshot::channel();
            if live.control.send(Control::Snapshot(reply)).is_ok() {
                snapshots.push((*n, answer));
            }
        }
        let mut sources = Vec::new();
        for (n, answer) in snapshots {
            if let Ok(streams) = answer.await {
                sources.push((n, streams.printed_last()));
            }
        }
        if !sources.is_empty() {
            let lines = blocking(move || {
                sources
                    .into_iter()
                    .map(|(n, source)| (n, last_line(&source)))
                    .collect::<Vec<_>>()
            })
            .await
            .unwrap_or_default();
            for (n, line) in lines {
                if let Some(row) = self.rows.get_mut(&n)
                    && row.last_line != line
                {
                    row.last_line = line;
                    changed.insert(n);
                }
            }
        }
        if probe {
            let probes: Vec<(u64, mpsc::UnboundedSender<Control>)> = self
                .rows
                .iter()
                .filter_map(|(n, row)| Some((*n, row.live.as_ref()?.probe.clone()?)))
                .collect();
            let looks = probes
                .iter()
                .map(|(n, probe)| async move { (*n, waiting_for_input(Some(probe)).await) });
            for (n, waiting) in futures::future::join_all(looks).await {
                let Some(row) = self.rows.get_mut(&n) else {
                    continue;
                };
                let prompt = waiting.as_ref().and_then(|(_, prompt)| prompt.clone());
                if row.info.waiting_for_input != waiting.is_some() || row.prompt != prompt {
                    row.info.waiting_for_input = waiting.is_some();
                    row.prompt = prompt;
                    changed.insert(n);
                }
            }
        }
        changed
    }
}
