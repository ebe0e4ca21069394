//! One typed method per request on [`Client`]: each sends its request and reads its
//! answer through [`Responses`], so what a daemon gone under a request means is said
//! there, once.

use bashd_protocol::{
    ExecParams, ExecResult, FollowRequest, GrepRequest, JobInfo, JobRequest, JobsRequest,
    KillRequest, OutputPage, OutputRequest, PolicyCheck, PolicyVerdict, Request, ResizeRequest,
    Response, ScreenInfo, SendReply, SendRequest, SessionClosed, SessionInfo, StatusInfo, Stopping,
    WaitRequest,
};

use crate::client::{Client, Responses};
use crate::error::ClientError;

impl Client {
    /// The person's answers to asks (`bashc allow`, issue 44): list, answer, revoke,
    /// grant a host.
    pub async fn allow(
        &self,
        request: bashd_protocol::AllowRequest,
    ) -> Result<bashd_protocol::AllowReply, ClientError> {
        match self.one(Request::Allow(request)).await? {
            Response::Allow(reply) => Ok(reply),
            _ => Err(ClientError::Unexpected(
                "something other than asks and grants",
            )),
        }
    }

    /// Runs a command and waits for its result.
    pub async fn exec(&self, params: ExecParams) -> Result<ExecResult, ClientError> {
        self.request(Request::Exec(params)).await?.result().await
    }

    /// Runs a command and returns its responses as they come: `Started`, `Output`
    /// events and `Notice`s when `params.stream` asked for them, then `Finished`.
    pub async fn exec_events(&self, params: ExecParams) -> Result<Responses, ClientError> {
        self.request(Request::Exec(params)).await
    }

    /// A job's output as it comes: `Output` events (the part `request.from` asks for
    /// first), `Notice`s for lines missed, then `Finished` with its result.
    pub async fn follow(&self, request: FollowRequest) -> Result<Responses, ClientError> {
        self.request(Request::Follow(request)).await
    }

    /// The screen of a terminal job (`exec --pty`).
    pub async fn screen(&self, request: JobRequest) -> Result<ScreenInfo, ClientError> {
        match self.one(Request::Screen(request)).await? {
            Response::Screen(screen) => Ok(screen),
            _ => Err(ClientError::Unexpected("something other than a screen")),
        }
    }

    /// Gives a terminal job a new size; answers its screen.
    pub async fn resize(&self, request: ResizeRequest) -> Result<ScreenInfo, ClientError> {
        match self.one(Request::Resize(request)).await? {
            Response::Screen(screen) => Ok(screen),
            _ => Err(ClientError::Unexpected("something other than a screen")),
        }
    }

    /// Writes to the stdin pipe of a job started with `stdin: pipe`.
    pub async fn send(&self, request: SendRequest) -> Result<SendReply, ClientError> {
        match self.one(Request::Send(request)).await? {
            Response::Sent(sent) => Ok(sent),
            _ => Err(ClientError::Unexpected("something other than a send reply")),
        }
    }

    /// The lines of a job's output that match a regex, with context, as a page.
    pub async fn grep(&self, request: GrepRequest) -> Result<OutputPage, ClientError> {
        match self.one(Request::Grep(request)).await? {
            Response::Page(page) => Ok(page),
            _ => Err(ClientError::Unexpected("something other than a page")),
        }
    }

    /// A page of one stream of a job's full output.
    pub async fn output(&self, request: OutputRequest) -> Result<OutputPage, ClientError> {
        let mut responses = self.request(Request::Output(request)).await?;
        match responses.next().await? {
            Response::Page(page) => Ok(page),
            Response::Error(error) => Err(ClientError::Daemon(error)),
            _ => Err(ClientError::Unexpected("something other than a page")),
        }
    }

    /// Whether the daemon's policy would let `command` run in `workdir` (as `exec`
    /// would judge it there; `None`: in no known directory); nothing runs.
    pub async fn check_policy(
        &self,
        command: String,
        workdir: Option<String>,
    ) -> Result<PolicyVerdict, ClientError> {
        let check = PolicyCheck { command, workdir };
        let mut responses = self.request(Request::CheckPolicy(check)).await?;
        match responses.next().await? {
            Response::Policy(verdict) => Ok(verdict),
            Response::Error(error) => Err(ClientError::Daemon(error)),
            _ => Err(ClientError::Unexpected(
                "something other than a policy verdict",
            )),
        }
    }

    /// Asks the daemon to stop, as SIGTERM does: it answers, then stops every job of
    /// every session and exits.
    pub async fn stop(&self) -> Result<Stopping, ClientError> {
        match self.one(Request::Shutdown).await? {
            Response::Stopping(stopping) => Ok(stopping),
            _ => Err(ClientError::Unexpected(
                "something other than an answer to stop",
            )),
        }
    }

    pub async fn status(&self) -> Result<StatusInfo, ClientError> {
        status_of(self.one(Request::Status).await?)
    }

    /// The jobs of one session, or of all when `request.session` is `None`.
    pub async fn jobs(&self, request: JobsRequest) -> Result<Vec<JobInfo>, ClientError> {
        jobs_of(self.one(Request::Jobs(request)).await?)
    }

    /// A job's state and the output the caller's session has not seen yet.
    pub async fn check(&self, request: JobRequest) -> Result<ExecResult, ClientError> {
        self.result(Request::Check(request)).await
    }

    /// The job's result once it ends, or its state when the wait times out.
    pub async fn wait(&self, request: WaitRequest) -> Result<ExecResult, ClientError> {
        self.result(Request::Wait(request)).await
    }

    /// Stops a job and returns its result once every process of it is gone.
    pub async fn kill(&self, request: KillRequest) -> Result<ExecResult, ClientError> {
        self.result(Request::Kill(request)).await
    }

    pub async fn sessions(&self) -> Result<Vec<SessionInfo>, ClientError> {
        match self.one(Request::Sessions).await? {
            Response::Sessions(sessions) => Ok(sessions),
            _ => Err(ClientError::Unexpected(
                "something other than a session list",
            )),
        }
    }

    /// Waits on several jobs at once: until the first (or, with `all`, every) one ends
    /// or meets its conditions, or the timeout passes.
    pub async fn wait_many(
        &self,
        request: bashd_protocol::WaitManyRequest,
    ) -> Result<bashd_protocol::WaitedMany, ClientError> {
        match self.one(Request::WaitMany(request)).await? {
            Response::Waited(waited) => Ok(waited),
            _ => Err(ClientError::Unexpected("something other than wait results")),
        }
    }

    /// Every session's jobs, with their CPU, memory, prompt and last line (`bashc top`).
    pub async fn top(
        &self,
        request: bashd_protocol::TopRequest,
    ) -> Result<Vec<bashd_protocol::TopJob>, ClientError> {
        match self.one(Request::Top(request)).await? {
            Response::Top(rows) => Ok(rows),
            _ => Err(ClientError::Unexpected("something other than top's rows")),
        }
    }

    /// Every session's jobs and then their changes (`bashc top`'s view): the first
    /// response is `Response::Watch(WatchUpdate::Table)`, every later one `Changed`,
    /// until the request is cancelled ([`Client::cancel`]) or the connection ends.
    pub async fn watch(
        &self,
        request: bashd_protocol::WatchRequest,
    ) -> Result<Responses, ClientError> {
        self.request(Request::Watch(request)).await
    }

    /// Kills a session's jobs and removes its directory.
    pub async fn close_session(&self, session: String) -> Result<SessionClosed, ClientError> {
        match self.one(Request::CloseSession(session)).await? {
            Response::SessionClosed(closed) => Ok(closed),
            _ => Err(ClientError::Unexpected(
                "something other than a closed session",
            )),
        }
    }

    /// Sends a request that has exactly one response; an `Error` becomes `Err`.
    async fn one(&self, request: Request) -> Result<Response, ClientError> {
        answered(self.request(request).await?.next().await?)
    }

    async fn result(&self, request: Request) -> Result<ExecResult, ClientError> {
        result_of(self.one(request).await?)
    }
}

// What the one answer to a request means, for both clients (this one and
// `BlockingClient`), so that they tell the same errors.

/// The answer, or the daemon's error as an `Err`.
pub(crate) fn answered(response: Response) -> Result<Response, ClientError> {
    match response {
        Response::Error(error) => Err(ClientError::Daemon(error)),
        response => Ok(response),
    }
}

pub(crate) fn status_of(response: Response) -> Result<StatusInfo, ClientError> {
    match response {
        Response::Status(status) => Ok(status),
        _ => Err(ClientError::Unexpected("something other than a status")),
    }
}

pub(crate) fn jobs_of(response: Response) -> Result<Vec<JobInfo>, ClientError> {
    match response {
        Response::Jobs(jobs) => Ok(jobs),
        _ => Err(ClientError::Unexpected("something other than a job list")),
    }
}

pub(crate) fn result_of(response: Response) -> Result<ExecResult, ClientError> {
    match response {
        Response::Finished(result) => Ok(*result),
        _ => Err(ClientError::Unexpected("something other than a job result")),
    }
}
