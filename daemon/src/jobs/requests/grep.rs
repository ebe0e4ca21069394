//! `output --grep` (`bashc output --grep`, `bash_output(grep=...)`): the lines of a
//! job's output that match a regex, with context, read on a blocking thread from a
//! snapshot of its output.

use bashd_protocol::{Argument, ErrorHint, ErrorKind, ErrorReply, GrepRequest, OutputPage};
use regex::bytes::Regex;

use crate::jobs::table::handle::{JobsHandle, blocking};
use crate::output;

impl JobsHandle {
    /// The lines of a job's output that match a regex, on a blocking thread.
    pub(in crate::jobs) async fn grep(
        &self,
        request: GrepRequest,
    ) -> Result<OutputPage, ErrorReply> {
        let regex = compile(&request.pattern, Argument::Grep)?;
        let asker = self.asker(request.caller, request.any_session);
        let (lookup, streams) = self.lookup(asker, request.job).await?;
        let job = lookup.summary.job;
        let source = streams.take(request.stream, job)?;
        let limit = request.limit.unwrap_or(lookup.page_lines);
        let (stream, context, offset) = (request.stream, request.context, request.offset);
        blocking(move || output::grep(source, job, stream, &regex, context, offset, limit)).await?
    }
}

/// `what`'s pattern as a regex, or the error that names it.
pub(in crate::jobs) fn compile(pattern: &str, argument: Argument) -> Result<Regex, ErrorReply> {
    Regex::new(pattern).map_err(|e| {
        ErrorReply::new(
            ErrorKind::InvalidRequest,
            format!("the pattern {pattern:?} is not a valid regex: {e}"),
        )
        .with_hint(ErrorHint::BadArgument { argument })
    })
}
