//! The one loop that reads a request's responses to its end: `Client::exec`, the
//! CLI's `exec --stream` and `follow`, and MCP's `bash` and `bash_wait` all wait on a
//! job through it, so what each response (and a connection's end) means is decided
//! once. A front end plugs in what it does on the way through [`Watch`]: print each
//! event, tell its caller of progress, give up when its caller cancels.

use std::future::Future;
use std::time::Duration;

use bashd_protocol::{ExecResult, JobId, Response};
use tokio_util::sync::CancellationToken;

use crate::client::Responses;
use crate::error::ClientError;

/// What a front end does while a request runs: hooks of [`Responses::watch`], each with
/// a default that does nothing.
///
/// ```no_run
/// # async fn example(client: bashc::Client) -> Result<(), bashc::ClientError> {
/// use bashc::protocol::{ExecParams, Response};
///
/// /// Prints what the command prints, as it comes.
/// struct Print;
///
/// impl bashc::Watch for Print {
///     type Error = bashc::ClientError;
///
///     fn event(&mut self, response: Response) -> Result<(), bashc::ClientError> {
///         if let Response::Output(chunk) = response {
///             print!("{}", String::from_utf8_lossy(&chunk.bytes));
///         }
///         Ok(())
///     }
/// }
///
/// let mut params = ExecParams::new("make", "my-session", "/src/project");
/// params.stream = true;
/// let result = client.exec_events(params).await?.watch(&mut Print).await?;
/// println!("exit code {:?}", result.exit_code);
/// # Ok(()) }
/// ```
pub trait Watch {
    /// The error the watch ends with: a [`ClientError`], or the front end's own (a
    /// failed write of what it prints).
    type Error: From<ClientError>;

    /// A response that comes ahead of the final one: `Started`, `Output`, `Notice`.
    fn event(&mut self, response: Response) -> Result<(), Self::Error> {
        let _ = response;
        Ok(())
    }

    /// How often [`Watch::tick`] is called while the request runs; `None`, never.
    fn tick_every(&self) -> Option<Duration> {
        None
    }

    /// Called every [`Watch::tick_every`] while no final response has come, with the
    /// job once known and the time since the watch began (a progress report).
    fn tick(&mut self, job: Option<JobId>, elapsed: Duration) -> impl Future<Output = ()> + Send {
        let _ = (job, elapsed);
        async {}
    }

    /// A token the front end cancels to give the request up: the daemon is told (a
    /// foreground job is killed, a wait stops) and the watch ends with
    /// [`ClientError::Cancelled`].
    fn cancellation(&self) -> Option<CancellationToken> {
        None
    }
}

/// The watch of a caller that only wants the result.
struct Quiet;

impl Watch for Quiet {
    type Error = ClientError;
}

/// One turn of the loop: what woke it.
enum Step {
    /// Boxed: a response is large, and a turn is mostly a tick.
    Response(Box<Result<Response, ClientError>>),
    Tick,
    Cancelled,
}

/// What one response to a command means to the loop that waits for its result, in
/// either client (this one, and `BlockingClient::exec`'s).
#[expect(
    clippy::large_enum_variant,
    reason = "a turn lives for one match, never stored: boxing each event would allocate for nothing"
)]
pub(crate) enum Turn {
    /// The result: the loop ends.
    Done(Box<ExecResult>),
    /// An event ahead of it (`Started`, `Output`, `Notice`), for the front end.
    Event(Response),
}

pub(crate) fn turn(response: Response) -> Result<Turn, ClientError> {
    match response {
        Response::Finished(result) => Ok(Turn::Done(result)),
        Response::Error(error) => Err(ClientError::Daemon(error)),
        response @ (Response::Started(_) | Response::Output(_) | Response::Notice(_)) => {
            Ok(Turn::Event(response))
        }
        _ => Err(ClientError::Unexpected("a reply to another request")),
    }
}

impl Responses {
    /// Reads the responses to the end and answers the job's result: `Finished`, or
    /// the error that ended the request (the daemon's, or what the connection's end
    /// means, [`Responses::next`]).
    pub async fn result(self) -> Result<ExecResult, ClientError> {
        self.watch(&mut Quiet).await
    }

    /// As [`Responses::result`], with `watch` told of each event on the way, ticked,
    /// and able to cancel.
    pub async fn watch<W: Watch + Send>(mut self, watch: &mut W) -> Result<ExecResult, W::Error> {
        let began = tokio::time::Instant::now();
        let cancellation = watch.cancellation();
        let mut ticks = watch
            .tick_every()
            .map(|every| tokio::time::interval_at(began + every, every));
        loop {
            // Cancelling a branch loses nothing: responses wait in their channel.
            let step = tokio::select! {
                response = self.next() => Step::Response(Box::new(response)),
                _ = async { ticks.as_mut().expect("polled only when set").tick().await },
                    if ticks.is_some() => Step::Tick,
                () = async { cancellation.as_ref().expect("polled only when set").cancelled().await },
                    if cancellation.is_some() => Step::Cancelled,
            };
            match step {
                Step::Response(response) => match turn((*response)?)? {
                    Turn::Done(result) => return Ok(*result),
                    Turn::Event(response) => watch.event(response)?,
                },
                Step::Tick => watch.tick(self.job(), began.elapsed()).await,
                Step::Cancelled => {
                    // rmcp, for one, sends no answer to a cancelled call: whether the
                    // daemon heard is not the caller's concern any more.
                    let _ = self.cancel().await;
                    return Err(ClientError::Cancelled.into());
                }
            }
        }
    }
}
