//! `output` (`bashc output`, `bash_output`): a page of a job's output, by line, from
//! the start or the end. The file is read on a blocking thread, never on the actor or
//! the job's supervisor.

use bashd_protocol::{ErrorReply, OutputPage, OutputRequest, limits};

use crate::jobs::table::handle::{JobsHandle, blocking};
use crate::output;

impl JobsHandle {
    /// A page of a job's output. The file is read on a blocking thread, never on the
    /// actor or the job's supervisor.
    pub(in crate::jobs) async fn output(
        &self,
        request: OutputRequest,
    ) -> Result<OutputPage, ErrorReply> {
        let asker = self.asker(request.caller, request.any_session);
        let (lookup, streams) = self.lookup(asker, request.job).await?;
        let job = lookup.summary.job;
        let source = streams.take(request.stream, job)?;
        let limit = request.limit.unwrap_or(lookup.page_lines);
        let offset = match request.from_end {
            // Line `offset` from the end; a page that starts before line 1 starts there.
            true => (source.total_lines + 1)
                .saturating_sub(request.offset)
                .max(1),
            false => request.offset,
        };
        // By default a page is as big as a result shows: the configured limit, or the
        // job's own when it asked for more.
        let default_bytes =
            (lookup.max_bytes as u64).max(self.config.borrow().limits.max_bytes.into());
        let max_bytes = request
            .max_bytes
            .unwrap_or(default_bytes)
            .clamp(1, limits::MAX_PAGE_BYTES);
        let ask = output::Ask {
            job,
            stream: request.stream,
            offset,
            limit,
            max_bytes,
        };
        let mut page = blocking(move || output::page(source, ask)).await??;
        if page.lines == 0 {
            // A job that never ran has nothing to page: say why.
            page.notices.extend(lookup.summary.notices);
        }
        Ok(page)
    }
}
