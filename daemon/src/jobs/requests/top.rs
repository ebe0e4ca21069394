//! `bashc top` on the request's side (issue 32): the listing of every session's jobs,
//! with what `jobs` adds (ports, waiting for input), and per running job its CPU time
//! and memory (read from /proc for all of them in one blocking task), what it asks
//! when it waits, and its last line (from a snapshot of its output, the last 4 KiB).

use std::io::{Read, Seek, SeekFrom};

use bashd_protocol::{ErrorReply, JobId, JobInfo, JobsRequest, ProcStat, TopJob, TopRequest};

use crate::jobs::job::supervisor::Control;
use crate::jobs::os::probe;
use crate::jobs::requests::jobs::ListJobs;
use crate::jobs::table::handle::{JobsHandle, Listing, LiveJob, blocking};
use crate::jobs::table::queries::waiting_for_input;
use crate::output::{Content, OutputSource};

/// The most of a last line a row carries.
const LAST_LINE_BYTES: usize = 200;
/// How much of the end of a stream is read for its last line.
const TAIL_BYTES: u64 = 4096;

impl JobsHandle {
    pub async fn top(&self, request: TopRequest) -> Result<Vec<TopJob>, ErrorReply> {
        let listing = JobsRequest {
            caller: request.caller,
            session: None,
        };
        let Listing { mut jobs, mut live } = self
            .call(ListJobs {
                request: listing,
                // From inside a sandboxed job, only what that job may reach.
                origin: self.origin.clone(),
            })
            .await??;
        if !request.jobs.is_empty() {
            (jobs, live) = only(jobs, live, &request.jobs);
        }
        let mut rows: Vec<TopJob> = jobs
            .into_iter()
            .map(|info| TopJob {
                info,
                cpu_ms: None,
                rss_bytes: None,
                prompt: None,
                last_line: None,
            })
            .collect();
        if live.is_empty() {
            return Ok(rows);
        }
        let roots: Vec<u32> = live.iter().map(|job| job.root).collect();
        let looked = blocking(move || {
            let groups: Vec<Vec<u32>> =
                roots.iter().map(|&root| probe::descendants(root)).collect();
            let usage: Vec<(u64, u64)> = groups.iter().map(|pids| usage(pids)).collect();
            (probe::listening(&groups), usage)
        })
        .await
        .unwrap_or_default();
        for (job, (ports, (cpu_ms, rss_bytes))) in
            live.iter().zip(looked.0.into_iter().zip(looked.1))
        {
            let row = &mut rows[job.index];
            row.info.ports = ports;
            row.cpu_ms = Some(cpu_ms);
            row.rss_bytes = Some(rss_bytes);
        }
        let looks = live.iter().map(|job| async {
            let waiting = waiting_for_input(job.probe.as_ref()).await;
            let (reply, answer) = tokio::sync::oneshot::channel();
            let last = match job.control.send(Control::Snapshot(reply)) {
                Ok(()) => answer.await.ok(),
                Err(_) => None,
            };
            (job.index, waiting, last)
        });
        let mut snapshots = Vec::new();
        for (index, waiting, streams) in futures::future::join_all(looks).await {
            rows[index].info.waiting_for_input = waiting.is_some();
            rows[index].prompt = waiting.and_then(|(_, prompt)| prompt);
            if let Some(streams) = streams {
                snapshots.push((index, streams.printed_last()));
            }
        }
        let lines = blocking(move || {
            snapshots
                .into_iter()
                .map(|(index, source)| (index, last_line(&source)))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for (index, line) in lines {
            rows[index].last_line = line;
        }
        Ok(rows)
    }
}

/// The rows of a listing for `wanted` jobs only, with their running jobs' places
/// in it.
fn only(jobs: Vec<JobInfo>, live: Vec<LiveJob>, wanted: &[JobId]) -> (Vec<JobInfo>, Vec<LiveJob>) {
    let mut place = vec![None; jobs.len()];
    let mut kept = Vec::new();
    for (index, info) in jobs.into_iter().enumerate() {
        if wanted.contains(&info.job) {
            place[index] = Some(kept.len());
            kept.push(info);
        }
    }
    let live = live
        .into_iter()
        .filter_map(|mut job| {
            job.index = place[job.index]?;
            Some(job)
        })
        .collect();
    (kept, live)
}

/// CPU time (ms) and resident memory (bytes) of `pids`, from /proc; a process gone
/// meanwhile counts nothing.
fn usage(pids: &[u32]) -> (u64, u64) {
    let ticks = rustix::param::clock_ticks_per_second().max(1);
    let page = rustix::param::page_size().max(1) as u64;
    let mut cpu_ticks = 0;
    let mut rss_pages = 0;
    for stat in pids.iter().filter_map(|&pid| ProcStat::read(pid)) {
        cpu_ticks += stat.cpu_ticks();
        rss_pages += stat.rss;
    }
    (cpu_ticks * 1000 / ticks, rss_pages * page)
}

/// The last non-empty line of a stream, read from its last few KiB.
pub(in crate::jobs) fn last_line(source: &OutputSource) -> Option<String> {
    let tail: Vec<u8> = match &source.content {
        Content::Memory(text) => text[text.len().saturating_sub(TAIL_BYTES as usize)..].to_vec(),
        Content::File { path, len, .. } => {
            let mut file = std::fs::File::open(path).ok()?;
            let from = len.saturating_sub(TAIL_BYTES);
            file.seek(SeekFrom::Start(from)).ok()?;
            let mut tail = Vec::new();
            file.take(len - from).read_to_end(&mut tail).ok()?;
            tail
        }
    };
    let line = tail
        .split(|&b| b == b'\n')
        .rev()
        .find(|line| !line.iter().all(u8::is_ascii_whitespace))?;
    let text = String::from_utf8_lossy(&line[..line.len().min(LAST_LINE_BYTES)]);
    Some(text.into_owned())
}
