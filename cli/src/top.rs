//! `bashc top` (issue 32): a live view of every session's jobs for the person who runs
//! the agents, in a terminal (ratatui on crossterm), or once as text for scripts
//! (`--once`, the same table, one `Request::Top`). The view redraws from events: it
//! opens a `Request::Watch`, whose first answer is the whole table and every later one
//! only the jobs that changed (started, changed state, ended, printed a new last line,
//! began waiting for input); every `--interval` it asks `Top` for the CPU, memory and
//! ports of the rows it shows, which the watch does not carry (reading /proc costs per
//! process). Were the watch refused, it falls back to asking `Top` for the whole table
//! every `--interval`. It acts as a session of its own (`top-<pid>`), so it takes no
//! agent's inbox.
//!
//! Keys: Up/Down pick a job; f follows its output; s shows a terminal job's screen;
//! i types a line into it (Enter sends it with a newline); k kills it and c closes its
//! session (each asks y first); q quits.
//!
//! Asks (issue 44): the pending asks are listed above the table, read every
//! `--interval` (`Request::Allow`, as `bashc allow --list`); the first is the one the
//! keys answer: a grants it once, A for its session, r refuses it.
//!
//! Over 600 lines as one view's whole: `View` (about 430 lines) is the state that its
//! watch, its keys, its prompts and its drawing all read and change.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::Context;
use bashc::Target;
use bashc::protocol::{
    AllowRequest, AskInfo, AskState, Caller, GrantScope, JobId, JobRef, JobRequest, JobState,
    KillRequest, OutputRequest, Response, SendRequest, StreamName, TopJob, TopRequest,
    WatchRequest, WatchUpdate,
};
use clap::Args;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Text};
use ratatui::widgets::{Block, Paragraph};
use tokio::sync::mpsc;

use crate::common::{UsageError, connect, print};

/// Lines of a followed job's output shown under the table.
const FOLLOW_LINES: u64 = 12;

#[derive(Debug, Args)]
pub struct TopArgs {
    /// Print the table once, as text, and exit (for scripts).
    #[arg(long)]
    once: bool,
    /// With --once: print the rows as JSON.
    #[arg(long, requires = "once")]
    json: bool,
    /// Seconds between two looks at the CPU, memory and ports of the rows shown (the
    /// rest of the table is redrawn as it changes).
    #[arg(long, value_name = "SECS", default_value_t = 1.0)]
    interval: f64,
}

pub async fn top(args: TopArgs, target: &Target) -> anyhow::Result<u8> {
    if !(0.05..=3600.0).contains(&args.interval) {
        return Err(UsageError(format!(
            "--interval {} is outside 0.05 to 3600 seconds",
            args.interval
        ))
        .into());
    }
    if !args.once && !std::io::stdout().is_terminal() {
        return Err(UsageError(
            "bashc top draws on a terminal, and stdout is none: run it in one, or use bashc top --once for a table to read or pipe".to_owned(),
        )
        .into());
    }
    let client = connect(target).await?;
    let caller = Caller {
        session: format!("top-{}", std::process::id()),
        owner: None,
    };
    let request = TopRequest {
        caller: caller.clone(),
        jobs: Vec::new(),
    };
    if args.once {
        let rows = sorted(client.top(request).await?);
        let asks = pending_asks(&client).await.unwrap_or_default();
        print(args.json, &rows, |rows| {
            let mut lines = asks_lines(&asks);
            lines.extend(table(rows, None, None));
            lines.join("\n") + "\n"
        })?;
        return Ok(0);
    }
    let mut terminal = ratatui::try_init().context("cannot take the terminal")?;
    let outcome = View::new(client, caller, Duration::from_secs_f64(args.interval))
        .run(&mut terminal)
        .await;
    ratatui::restore();
    outcome.map(|()| 0)
}

/// What the lower pane shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pane {
    None,
    Follow,
    Screen,
}

/// What the key line is doing.
enum Mode {
    Browse,
    /// Typing a line for the job.
    Input(String),
    /// Asking y before an action.
    Confirm(Action),
}

#[derive(Clone)]
enum Action {
    Kill(JobId),
    Close(String),
}

struct View {
    client: bashc::Client,
    caller: Caller,
    interval: Duration,
    /// Every job, sorted as shown.
    rows: Vec<TopJob>,
    /// When each running job's age was as its row says, to age it between updates.
    aged_at: HashMap<JobId, Instant>,
    /// The first row shown, and how many rows the table has room for.
    scroll: usize,
    room: usize,
    /// The table's changes from the daemon; `None` once the watch failed, when the
    /// view asks for the whole table every interval instead.
    watch: Option<bashc::Responses>,
    /// CPU time of each running job at the previous look, for a rate.
    cpu_before: HashMap<JobId, (u64, Instant)>,
    cpu_rate: HashMap<JobId, f64>,
    selected: usize,
    pane: Pane,
    pane_text: Vec<String>,
    mode: Mode,
    message: String,
    /// The pending asks, oldest first: shown above the table, the first answered by
    /// the keys a, A and r.
    asks: Vec<AskInfo>,
}

/// The pending asks, oldest first.
async fn pending_asks(client: &bashc::Client) -> Result<Vec<AskInfo>, bashc::ClientError> {
    let reply = client.allow(AllowRequest::List).await?;
    Ok(reply
        .asks
        .into_iter()
        .filter(|ask| ask.state == AskState::Pending)
        .collect())
}

/// The asks as lines above the table: none when none waits.
fn asks_lines(asks: &[AskInfo]) -> Vec<String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    asks.iter()
        .map(|ask| {
            clean(&format!(
                "ASK {}  {}  {}  {}  ({} s left)",
                ask.id,
                ask.session,
                ask.kind,
                cut(&ask.command, 60),
                ask.expires_ms.saturating_sub(now) / 1000
            ))
        })
        .collect()
}

impl View {
    fn new(client: bashc::Client, caller: Caller, interval: Duration) -> View {
        View {
            client,
            caller,
            interval,
            rows: Vec::new(),
            aged_at: HashMap::new(),
            scroll: 0,
            room: usize::MAX,
            watch: None,
            cpu_before: HashMap::new(),
            cpu_rate: HashMap::new(),
            selected: 0,
            pane: Pane::None,
            pane_text: Vec::new(),
            mode: Mode::Browse,
            message: String::new(),
            asks: Vec::new(),
        }
    }

    /// Reads the pending asks again; a daemon that refuses (this view runs inside a
    /// job) leaves none shown, and says why once.
    async fn refresh_asks(&mut self) {
        match pending_asks(&self.client).await {
            Ok(asks) => self.asks = asks,
            Err(e) => {
                if !self.asks.is_empty() || self.message.is_empty() {
                    self.message = format!("cannot read the asks: {e}");
                }
                self.asks.clear();
            }
        }
    }

    /// Answers the first pending ask.
    async fn answer(&mut self, grant: bool, scope: GrantScope) {
        let Some(ask) = self.asks.first().map(|ask| ask.id) else {
            return;
        };
        let answered = self
            .client
            .allow(AllowRequest::Answer {
                ask,
                grant,
                scope,
                via: Some("bashc top".to_owned()),
            })
            .await;
        self.message = match answered {
            Ok(reply) => reply.done.unwrap_or_default(),
            Err(e) => format!(
                "cannot answer {ask}: {}",
                crate::wording::client_error(&e, &crate::wording::Cli)
            ),
        };
        self.refresh_asks().await;
    }

    async fn run(mut self, terminal: &mut ratatui::DefaultTerminal) -> anyhow::Result<()> {
        let (keys_tx, mut keys) = mpsc::channel(64);
        // Reading the terminal blocks: a thread of its own, so the connection's task
        // on this runtime goes on.
        std::thread::spawn(move || {
            loop {
                match event::poll(Duration::from_millis(200)) {
                    Ok(true) => match event::read() {
                        Ok(event) => {
                            if keys_tx.blocking_send(event).is_err() {
                                return;
                            }
                        }
                        Err(_) => return,
                    },
                    Ok(false) => {
                        if keys_tx.is_closed() {
                            return;
                        }
                    }
                    Err(_) => return,
                }
            }
        });
        self.watch = match self
            .client
            .watch(WatchRequest {
                caller: self.caller.clone(),
            })
            .await
        {
            Ok(watch) => Some(watch),
            Err(e) => {
                self.message = format!("cannot watch the jobs, asking every interval: {e}");
                None
            }
        };
        let mut tick = tokio::time::interval(self.interval);
        loop {
            terminal.draw(|frame| self.draw(frame))?;
            // Cancelling any branch loses nothing: keys and the watch's answers stay in
            // their channels.
            tokio::select! {
                _ = tick.tick() => {
                    self.refresh_asks().await;
                    self.refresh().await;
                }
                update = next(&mut self.watch) => self.apply(update),
                event = keys.recv() => {
                    let Some(event) = event else { return Ok(()) };
                    if let Event::Key(key) = event
                        && key.kind == KeyEventKind::Press
                        && !self.key(key.code).await
                    {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// An answer of the watch: the whole table, or what changed in it.
    fn apply(&mut self, update: Result<Response, bashc::ClientError>) {
        let job = self.selected_job();
        let (rows, gone) = match update {
            Ok(Response::Watch(WatchUpdate::Table(rows))) => {
                let keep = self.rows.drain(..).map(|row| (row.info.job, row)).collect();
                (merged(keep, rows), Vec::new())
            }
            Ok(Response::Watch(WatchUpdate::Changed { rows, gone })) => {
                let keep = self.rows.drain(..).map(|row| (row.info.job, row)).collect();
                (merged(keep, rows), gone)
            }
            Ok(Response::Error(e)) => return self.watch_failed(e.to_string()),
            Ok(_) => return,
            Err(e) => return self.watch_failed(e.to_string()),
        };
        let now = Instant::now();
        for job in &gone {
            self.aged_at.remove(job);
        }
        let rows: Vec<TopJob> = rows
            .into_values()
            .filter(|row| !gone.contains(&row.info.job))
            .collect();
        for row in &rows {
            self.aged_at.entry(row.info.job).or_insert(now);
            if row.info.state != JobState::Running {
                self.cpu_rate.remove(&row.info.job);
            }
        }
        self.rows = sorted(rows);
        self.reselect(job);
    }

    /// The job of the selected row.
    fn selected_job(&self) -> Option<JobId> {
        self.rows.get(self.selected).map(|row| row.info.job)
    }

    /// Selects `job`'s row again after the rows moved: the selection follows the job,
    /// never the row, so a job that ended and sank does not leave the highlight on
    /// the job that rose into its place, for the next `k y` to kill (issue 45).
    fn reselect(&mut self, job: Option<JobId>) {
        let found = job.and_then(|job| self.rows.iter().position(|row| row.info.job == job));
        self.selected = found.unwrap_or(self.selected.min(self.rows.len().saturating_sub(1)));
    }

    fn watch_failed(&mut self, why: String) {
        self.watch = None;
        self.message = format!("the watch ended ({why}); asking every interval");
    }

    /// Every interval: the CPU, memory and ports of the rows shown, with their last
    /// lines; the whole table when there is no watch.
    async fn refresh(&mut self) {
        let shown: Vec<JobId> = match self.watch {
            Some(_) => self
                .rows
                .iter()
                .skip(self.scroll)
                .take(self.room)
                .filter(|row| row.info.state == JobState::Running)
                .map(|row| row.info.job)
                .collect(),
            None => Vec::new(),
        };
        if self.watch.is_some() && shown.is_empty() {
            return self.refresh_pane().await;
        }
        let looked = self
            .client
            .top(TopRequest {
                caller: self.caller.clone(),
                jobs: shown,
            })
            .await;
        let looked = match looked {
            Ok(looked) => looked,
            Err(e) => {
                self.message = format!("cannot read the jobs: {e}");
                return;
            }
        };
        let now = Instant::now();
        for row in &looked {
            if let Some(cpu) = row.cpu_ms {
                if let Some((before, at)) = self.cpu_before.get(&row.info.job) {
                    let elapsed = now.duration_since(*at).as_secs_f64() * 1000.0;
                    if elapsed > 0.0 {
                        let rate = cpu.saturating_sub(*before) as f64 / elapsed * 100.0;
                        self.cpu_rate.insert(row.info.job, rate);
                    }
                }
                self.cpu_before.insert(row.info.job, (cpu, now));
            }
            self.aged_at.insert(row.info.job, now);
        }
        if self.watch.is_some() {
            let mut by_job: HashMap<JobId, TopJob> =
                looked.into_iter().map(|row| (row.info.job, row)).collect();
            for row in &mut self.rows {
                if let Some(looked) = by_job.remove(&row.info.job)
                    && looked.info.state == row.info.state
                {
                    *row = looked;
                }
            }
        } else {
            let job = self.selected_job();
            self.rows = sorted(looked);
            self.reselect(job);
        }
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
        self.refresh_pane().await;
    }

    async fn refresh_pane(&mut self) {
        let Some(row) = self.rows.get(self.selected) else {
            self.pane_text.clear();
            return;
        };
        let job = JobRef::Id(row.info.job.to_string());
        self.pane_text = match self.pane {
            Pane::None => Vec::new(),
            Pane::Follow => {
                // Both streams: a dev server logs its requests on stderr (issue 45).
                // Their lines carry no time to interleave them by, so stderr's follow
                // stdout's, marked.
                let mut text = Vec::new();
                for stream in [StreamName::Stdout, StreamName::Stderr] {
                    let page = self
                        .client
                        .output(OutputRequest {
                            job: job.clone(),
                            stream,
                            offset: FOLLOW_LINES,
                            limit: Some(FOLLOW_LINES),
                            caller: self.caller.clone(),
                            any_session: true,
                            max_bytes: None,
                            from_end: true,
                        })
                        .await;
                    match (page, stream) {
                        (Ok(page), StreamName::Stdout) => {
                            text.extend(page.text.lines().map(clean));
                        }
                        (Ok(page), StreamName::Stderr) => {
                            text.extend(page.text.lines().map(|l| format!("stderr│ {}", clean(l))));
                        }
                        // A job on a terminal, or with stderr in stdout, has no stderr.
                        (Err(_), StreamName::Stderr) => {}
                        (Err(e), StreamName::Stdout) => {
                            text.push(format!("cannot read its output: {e}"));
                        }
                    }
                }
                text
            }
            Pane::Screen => {
                let screen = self
                    .client
                    .screen(JobRequest {
                        caller: self.caller.clone(),
                        job,
                        any_session: true,
                    })
                    .await;
                match screen {
                    Ok(screen) => screen.lines.iter().map(|l| clean(l)).collect(),
                    Err(e) => vec![format!("no screen: {e}")],
                }
            }
        };
    }

    /// Handles a key; false to quit.
    async fn key(&mut self, code: KeyCode) -> bool {
        let selected = self.rows.get(self.selected).map(|r| r.info.clone());
        match std::mem::replace(&mut self.mode, Mode::Browse) {
            Mode::Input(mut line) => {
                match code {
                    KeyCode::Enter => {
                        if let Some(info) = &selected {
                            line.push('\n');
                            let sent = self
                                .client
                                .send(SendRequest {
                                    caller: Caller {
                                        session: info.session.clone(),
                                        owner: None,
                                    },
                                    job: JobRef::Id(info.job.to_string()),
                                    bytes: line.into_bytes(),
                                    eof: false,
                                    any_session: false,
                                    keys: Vec::new(),
                                    literal: false,
                                    screen_settle_ms: None,
                                })
                                .await;
                            self.message = match sent {
                                Ok(sent) => format!("sent {} bytes to {}", sent.written, info.job),
                                Err(e) => format!(
                                    "cannot send: {}",
                                    crate::wording::client_error(&e, &crate::wording::Cli)
                                ),
                            };
                        }
                        self.refresh().await;
                    }
                    KeyCode::Esc => self.message.clear(),
                    KeyCode::Backspace => {
                        line.pop();
                        self.mode = Mode::Input(line);
                    }
                    KeyCode::Char(c) => {
                        line.push(c);
                        self.mode = Mode::Input(line);
                    }
                    _ => self.mode = Mode::Input(line),
                }
                return true;
            }
            Mode::Confirm(action) => {
                if code == KeyCode::Char('y') {
                    self.act(action).await;
                    self.refresh().await;
                } else {
                    self.message = "nothing done".to_owned();
                }
                return true;
            }
            Mode::Browse => {}
        }
        match code {
            KeyCode::Char('q') | KeyCode::Esc => return false,
            KeyCode::Up => self.selected = self.selected.saturating_sub(1),
            KeyCode::Down => {
                self.selected = (self.selected + 1).min(self.rows.len().saturating_sub(1));
            }
            KeyCode::Char('f') | KeyCode::Enter => self.toggle(Pane::Follow),
            KeyCode::Char('s') => self.toggle(Pane::Screen),
            KeyCode::Char('i') if selected.is_some() => self.mode = Mode::Input(String::new()),
            KeyCode::Char('k') => {
                if let Some(info) = selected {
                    self.mode = Mode::Confirm(Action::Kill(info.job));
                }
            }
            KeyCode::Char('c') => {
                if let Some(info) = selected {
                    self.mode = Mode::Confirm(Action::Close(info.session));
                }
            }
            KeyCode::Char('a') => self.answer(true, GrantScope::Once).await,
            KeyCode::Char('A') => self.answer(true, GrantScope::Session).await,
            KeyCode::Char('r') => self.answer(false, GrantScope::Once).await,
            _ => {}
        }
        self.refresh_pane().await;
        true
    }

    fn toggle(&mut self, pane: Pane) {
        self.pane = if self.pane == pane { Pane::None } else { pane };
    }

    async fn act(&mut self, action: Action) {
        self.message = match action {
            Action::Kill(job) => {
                let killed = self
                    .client
                    .kill(KillRequest {
                        caller: self.caller.clone(),
                        job: JobRef::Id(job.to_string()),
                        signal: None,
                        grace_ms: None,
                        any_session: true,
                    })
                    .await;
                match killed {
                    Ok(result) => format!("{job}: {}", result.state),
                    Err(e) => format!(
                        "cannot kill {job}: {}",
                        crate::wording::client_error(&e, &crate::wording::Cli)
                    ),
                }
            }
            Action::Close(session) => match self.client.close_session(session.clone()).await {
                Ok(closed) => format!(
                    "closed session {session} ({} jobs killed)",
                    closed.killed_jobs
                ),
                Err(e) => format!("cannot close {session}: {e}"),
            },
        };
    }

    fn draw(&mut self, frame: &mut ratatui::Frame) {
        let pane_height = match self.pane {
            Pane::None => 0,
            _ => (self.pane_text.len() as u16 + 2).clamp(3, frame.area().height / 2),
        };
        let asks = asks_lines(&self.asks);
        let asks_height = if asks.is_empty() {
            0
        } else {
            (asks.len() as u16 + 2).min(frame.area().height / 3)
        };
        let [asks_area, table_area, pane_area, key_area] = Layout::vertical([
            Constraint::Length(asks_height),
            Constraint::Min(3),
            Constraint::Length(pane_height),
            Constraint::Length(1),
        ])
        .areas(frame.area());
        if !asks.is_empty() {
            let lines: Vec<Line> = asks
                .into_iter()
                .enumerate()
                .map(|(i, text)| {
                    // The first is the one the keys answer.
                    if i == 0 {
                        Line::styled(text, Style::new().add_modifier(Modifier::BOLD))
                    } else {
                        Line::raw(text)
                    }
                })
                .collect();
            let title = format!(" {} asks wait for you ", self.asks.len());
            frame.render_widget(
                Paragraph::new(Text::from(lines)).block(Block::bordered().title(title)),
                asks_area,
            );
        }
        // Only the rows there is room for are made into lines: the border and the
        // heading take three.
        self.room = (table_area.height as usize).saturating_sub(3).max(1);
        self.scroll = self
            .scroll
            .min(self.selected)
            .max((self.selected + 1).saturating_sub(self.room));
        let now = Instant::now();
        let shown: Vec<TopJob> = self
            .rows
            .iter()
            .skip(self.scroll)
            .take(self.room)
            .map(|row| {
                let mut row = row.clone();
                if row.info.state == JobState::Running
                    && let Some(at) = self.aged_at.get(&row.info.job)
                {
                    row.info.duration_ms += now.duration_since(*at).as_millis() as u64;
                }
                row
            })
            .collect();
        // The border takes two columns.
        let width = table_area.width.saturating_sub(2) as usize;
        let lines: Vec<Line> = table(&shown, Some(&self.cpu_rate), Some(width))
            .into_iter()
            .enumerate()
            .map(|(i, text)| {
                // The heading is line 0; a row is line 1 + its place among those shown.
                if i == self.selected + 1 - self.scroll {
                    Line::styled(text, Style::new().add_modifier(Modifier::REVERSED))
                } else {
                    Line::raw(text)
                }
            })
            .collect();
        let title = format!(" bashd: {} jobs ", self.rows.len());
        frame.render_widget(
            Paragraph::new(Text::from(lines)).block(Block::bordered().title(title)),
            table_area,
        );
        if self.pane != Pane::None {
            let job = self
                .rows
                .get(self.selected)
                .map_or(String::new(), |r| r.info.job.to_string());
            let title = match self.pane {
                Pane::Screen => format!(" screen of {job} "),
                _ => format!(" output of {job} (last {FOLLOW_LINES} lines of each stream) "),
            };
            // The newest lines, as many as the pane holds.
            let room = pane_area.height.saturating_sub(2) as usize;
            let skip = self.pane_text.len().saturating_sub(room);
            let text: Vec<Line> = self.pane_text[skip..]
                .iter()
                .map(|l| Line::raw(l.clone()))
                .collect();
            frame.render_widget(
                Paragraph::new(Text::from(text)).block(Block::bordered().title(title)),
                pane_area,
            );
        }
        let keys = match &self.mode {
            Mode::Input(line) => format!("type for the job, Enter sends, Esc cancels: {line}"),
            Mode::Confirm(Action::Kill(job)) => format!("kill {job}? y/n"),
            Mode::Confirm(Action::Close(session)) => {
                format!("close session {session} and kill its jobs? y/n")
            }
            Mode::Browse if !self.message.is_empty() => self.message.clone(),
            Mode::Browse if !self.asks.is_empty() => format!(
                "{}: a grant once  A grant for its session  r refuse  |  Up/Down pick  f follow  k kill  q quit",
                self.asks[0].id
            ),
            Mode::Browse => {
                "Up/Down pick  f follow  s screen  i input  k kill  c close session  q quit"
                    .to_owned()
            }
        };
        frame.render_widget(Paragraph::new(clean(&keys)), key_area);
    }
}

/// The next answer of the watch, or never when there is none.
async fn next(watch: &mut Option<bashc::Responses>) -> Result<Response, bashc::ClientError> {
    match watch {
        Some(watch) => watch.next().await,
        None => std::future::pending().await,
    }
}

/// The rows the view had, by job, with `rows` from the watch over them; a row keeps
/// the CPU, memory and ports its last look read, which the watch does not carry.
fn merged(mut keep: HashMap<JobId, TopJob>, rows: Vec<TopJob>) -> HashMap<JobId, TopJob> {
    for mut row in rows {
        if let Some(old) = keep.get(&row.info.job) {
            row.cpu_ms = row.cpu_ms.or(old.cpu_ms);
            row.rss_bytes = row.rss_bytes.or(old.rss_bytes);
            if row.info.ports.is_empty() && row.info.state == JobState::Running {
                row.info.ports = old.info.ports.clone();
            }
        }
        keep.insert(row.info.job, row);
    }
    keep
}

/// Sessions with the latest activity first (a running job, then the newest start);
/// in each, running jobs first, then the newest.
pub fn sorted(mut rows: Vec<TopJob>) -> Vec<TopJob> {
    let mut activity: HashMap<String, (bool, String)> = HashMap::new();
    for row in &rows {
        let entry = activity.entry(row.info.session.clone()).or_default();
        entry.0 |= row.info.state == JobState::Running;
        if row.info.started_at > entry.1 {
            entry.1 = row.info.started_at.clone();
        }
    }
    rows.sort_by(|a, b| {
        let (sa, sb) = (&activity[&a.info.session], &activity[&b.info.session]);
        sb.cmp(sa)
            .then_with(|| a.info.session.cmp(&b.info.session))
            .then_with(|| {
                let running = |r: &TopJob| r.info.state == JobState::Running;
                running(b).cmp(&running(a))
            })
            .then_with(|| b.info.job.cmp(&a.info.job))
    });
    rows
}

/// The table as lines: a heading, then a row per job. `rates`: CPU in percent of a
/// core, when the view has two looks; else the CPU time so far. `width`: the columns
/// the view has; narrower than [`WIDE`], SESSION and PORTS narrow and CPU and MEM go,
/// so that COMMAND and LAST LINE keep room at 80 columns (issue 45); COMMAND and LAST
/// LINE share what is left.
pub fn table(
    rows: &[TopJob],
    rates: Option<&HashMap<JobId, f64>>,
    width: Option<usize>,
) -> Vec<String> {
    let narrow = width.is_some_and(|w| w < WIDE);
    let (session_w, ports_w) = if narrow { (12, 5) } else { (18, 11) };
    // SESSION JOB STATE [CPU MEM] AGE PORTS, each with the space after it.
    let fixed = session_w + 1 + 7 + 10 + if narrow { 0 } else { 7 + 9 } + 7 + ports_w + 1;
    let (command_w, last_w) = match width {
        Some(width) if narrow => {
            let left = width.saturating_sub(fixed);
            let command = (left / 2).max(8);
            (command, left.saturating_sub(command + 1))
        }
        _ => (30, 60),
    };
    let line = |cells: [&str; 9]| {
        let [session, job, state, cpu, memory, age, ports, command, last] = cells;
        let mut text = format!("{session:<session_w$} {job:<6} {state:<9} ");
        if !narrow {
            text.push_str(&format!("{cpu:>6} {memory:>8} "));
        }
        text.push_str(&format!(
            "{age:>6} {ports:<ports_w$} {command:<command_w$} {last}"
        ));
        text
    };
    let mut lines = vec![line([
        "SESSION",
        "JOB",
        "STATE",
        "CPU",
        "MEM",
        "AGE",
        "PORTS",
        "COMMAND",
        "LAST LINE / ASKS",
    ])];
    for row in rows {
        let info = &row.info;
        let state = match (info.state, info.waiting_for_input) {
            (JobState::Running, true) => "input?".to_owned(),
            (state, _) => state.to_string(),
        };
        let cpu = match (rates.and_then(|r| r.get(&info.job)), row.cpu_ms) {
            (Some(rate), _) => format!("{rate:.0}%"),
            (None, Some(ms)) => format!("{:.1}s", ms as f64 / 1000.0),
            (None, None) => "-".to_owned(),
        };
        let memory = row.rss_bytes.map_or("-".to_owned(), |b| {
            format!("{:.1}M", b as f64 / (1 << 20) as f64)
        });
        let ports: Vec<String> = info.ports.iter().map(|p| p.port.to_string()).collect();
        let ports = if ports.is_empty() {
            "-".to_owned()
        } else {
            ports.join(",")
        };
        let last = match (&row.prompt, &row.last_line) {
            (Some(prompt), _) if info.waiting_for_input => format!("asks: {prompt}"),
            (_, Some(line)) => line.clone(),
            _ => String::new(),
        };
        lines.push(line([
            &cut(&clean(&info.session), session_w),
            &info.job.to_string(),
            &state,
            &cpu,
            &memory,
            &age(info.duration_ms),
            &cut(&ports, ports_w),
            &cut(&clean(&info.command), command_w),
            &cut(&clean(&last), last_w),
        ]));
    }
    lines
}

/// The width from which the table has every column at its full width.
const WIDE: usize = 124;

fn age(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        _ => format!("{}h", secs / 3600),
    }
}

/// Text as one line of the terminal: control characters (escapes, newlines) shown as
/// `?`, so nothing a job printed or a command holds moves the cursor or sets colours.
pub fn clean(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() || ('\u{80}'..='\u{9f}').contains(&c) {
                '?'
            } else {
                c
            }
        })
        .collect()
}

/// At most `max` characters, the last one `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(max.saturating_sub(1)).collect();
    short.push('…');
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_a_job_prints_reaches_the_terminal_as_a_control() {
        assert_eq!(clean("a\x1b[31mred\r\n\u{9b}x"), "a?[31mred???x");
    }
}
