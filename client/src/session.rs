//! The handles a Rust user holds: a [`Session`] (a connection and the session its
//! requests act for) and a [`Job`] of it, each request one method. The protocol's
//! request structs stay available through [`Client`] for what these leave out.

use bashd_protocol::{
    Caller, ExecResult, JobId, JobInfo, JobRef, JobRequest, JobsRequest, KillRequest, Mode,
    OutputPage, OutputRequest, SendReply, SendRequest, SessionClosed, StreamName, WaitConditions,
    WaitRequest,
};

use crate::client::{Client, Responses};
use crate::error::ClientError;
use crate::options::ExecOptions;

/// A connection and the session its requests act for. Commands run in this process's
/// working directory, with its environment, unless [`ExecOptions`] say otherwise.
///
/// ```no_run
/// # async fn example() -> Result<(), bashc::ClientError> {
/// let client = bashc::connect(&bashc::Target::local()).await?;
/// let session = bashc::Session::new(client, "build");
/// let result = session.run("cargo --version").await?;
/// println!("{}", result.stdout.text);
///
/// // A server in the background, waited on until it listens.
/// let server = session.spawn("python3 -m http.server 8000").await?;
/// server.wait_until("Serving HTTP", 30).await?;
/// println!("{}", server.check().await?.stdout.text);
/// server.kill().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Session {
    client: Client,
    caller: Caller,
}

/// A job of a [`Session`], by its id.
#[derive(Debug, Clone)]
pub struct Job {
    session: Session,
    id: JobId,
}

impl Session {
    /// The session `name` on `client`'s daemon, owned by this process: when it exits,
    /// the session's foreground jobs are killed and its background jobs linger.
    pub fn new(client: Client, name: impl Into<String>) -> Session {
        Session {
            client,
            caller: Caller {
                session: name.into(),
                owner: None,
            },
        }
    }

    /// The session and owner its requests name.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    /// The connection.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Runs `command` with the daemon's defaults and waits for its result (a command
    /// that passes its timeout goes on in the background, as [`Job`]).
    pub async fn run(&self, command: &str) -> Result<ExecResult, ClientError> {
        self.exec(command, self.here()).await
    }

    /// Runs `command` with `options` and waits for its result.
    pub async fn exec(
        &self,
        command: &str,
        options: ExecOptions,
    ) -> Result<ExecResult, ClientError> {
        self.client
            .exec(options.params(command, self.caller.clone()))
            .await
    }

    /// Runs `command` and returns its responses as they come (`Started`, its output,
    /// then `Finished`), for [`Responses::watch`].
    pub async fn stream(&self, command: &str) -> Result<Responses, ClientError> {
        let options = ExecOptions {
            stream: true,
            ..self.here()
        };
        self.client
            .exec_events(options.params(command, self.caller.clone()))
            .await
    }

    /// Starts `command` in the background and returns its job at once.
    pub async fn spawn(&self, command: &str) -> Result<Job, ClientError> {
        let options = ExecOptions {
            mode: Some(Mode::Background),
            ..self.here()
        };
        let result = self.exec(command, options).await?;
        Ok(self.job(result.job))
    }

    /// The job `id` of this session.
    pub fn job(&self, id: JobId) -> Job {
        Job {
            session: self.clone(),
            id,
        }
    }

    /// The session's jobs, running and finished.
    pub async fn jobs(&self) -> Result<Vec<JobInfo>, ClientError> {
        self.client
            .jobs(JobsRequest {
                caller: self.caller.clone(),
                session: Some(self.caller.session.clone()),
            })
            .await
    }

    /// Kills the session's jobs and removes its directory.
    pub async fn close(self) -> Result<SessionClosed, ClientError> {
        self.client.close_session(self.caller.session).await
    }

    /// This process's working directory and environment.
    fn here(&self) -> ExecOptions {
        use std::os::unix::ffi::OsStrExt;
        ExecOptions {
            workdir: std::env::current_dir()
                .map(|dir| dir.to_string_lossy().into_owned())
                .unwrap_or_default(),
            env: std::env::vars_os()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
            ..ExecOptions::default()
        }
    }
}

impl Job {
    /// The job's id (`j12`).
    pub fn id(&self) -> JobId {
        self.id
    }

    fn job_ref(&self) -> JobRef {
        JobRef::Id(self.id.to_string())
    }

    fn request(&self) -> JobRequest {
        JobRequest {
            caller: self.session.caller.clone(),
            job: self.job_ref(),
            any_session: false,
        }
    }

    /// Its state, and the output this session has not seen yet.
    pub async fn check(&self) -> Result<ExecResult, ClientError> {
        self.session.client.check(self.request()).await
    }

    /// Its result once it ends.
    pub async fn wait(&self) -> Result<ExecResult, ClientError> {
        self.wait_for(WaitConditions::default(), None).await
    }

    /// Returns once a new line matches `regex`, the job ends, or `timeout_secs` pass;
    /// the result says which. The job runs on.
    pub async fn wait_until(
        &self,
        regex: &str,
        timeout_secs: u64,
    ) -> Result<ExecResult, ClientError> {
        let conditions = WaitConditions {
            until: Some(regex.to_owned()),
            ..WaitConditions::default()
        };
        self.wait_for(conditions, Some(timeout_secs.saturating_mul(1000)))
            .await
    }

    /// Returns once one of `conditions` is met, the job ends, or the timeout passes.
    pub async fn wait_for(
        &self,
        conditions: WaitConditions,
        timeout_ms: Option<u64>,
    ) -> Result<ExecResult, ClientError> {
        self.session
            .client
            .wait(WaitRequest {
                caller: self.session.caller.clone(),
                job: self.job_ref(),
                timeout_ms,
                conditions,
                any_session: false,
                mcp_call: false,
            })
            .await
    }

    /// Stops it (SIGTERM, a grace time, SIGKILL) and answers its result once every
    /// process of it is gone.
    pub async fn kill(&self) -> Result<ExecResult, ClientError> {
        self.session
            .client
            .kill(KillRequest {
                caller: self.session.caller.clone(),
                job: self.job_ref(),
                signal: None,
                grace_ms: None,
                any_session: false,
            })
            .await
    }

    /// Writes `bytes` to its stdin (a job started with `stdin: pipe`); `eof` closes it
    /// after.
    pub async fn send(&self, bytes: &[u8], eof: bool) -> Result<SendReply, ClientError> {
        self.session
            .client
            .send(SendRequest {
                caller: self.session.caller.clone(),
                job: self.job_ref(),
                bytes: bytes.to_vec(),
                eof,
                keys: Vec::new(),
                literal: false,
                screen_settle_ms: None,
                any_session: false,
            })
            .await
    }

    /// A page of one stream of its whole output: `limit` lines from line `offset`
    /// (counted from 1).
    pub async fn output(
        &self,
        stream: StreamName,
        offset: u64,
        limit: Option<u64>,
    ) -> Result<OutputPage, ClientError> {
        self.session
            .client
            .output(OutputRequest {
                job: self.job_ref(),
                stream,
                offset,
                limit,
                caller: self.session.caller.clone(),
                any_session: false,
                max_bytes: None,
                from_end: false,
            })
            .await
    }
}
