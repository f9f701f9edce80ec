//! The export's disk worker: the one thread that owns the device, takes every job queued so
//! far (up to a flush), runs them as ORAM batches, answers each job when all of its reads are
//! done, and shuffles in the background while no job waits.

use super::*;

pub(super) enum Work {
    Read {
        offset: u64,
        length: u32,
    },
    Write {
        offset: u64,
        data: Vec<u8>,
        fua: bool,
    },
    Zero {
        offset: u64,
        length: u64,
        fua: bool,
    },
    Flush,
}

pub(super) struct Job {
    pub(super) work: Work,
    pub(super) cookie: u64,
    pub(super) to: Outbox,
    pub(super) credit: Credit,
}

impl Job {
    pub(super) fn answer(self, result: JobResult) {
        let read_at = match self.work {
            Work::Read { offset, .. } => Some(offset),
            _ => None,
        };
        // A closed connection no longer wants the reply.
        let _ = self.to.send(Outgoing {
            cookie: self.cookie,
            read_at,
            result,
            credit: Some(self.credit),
        });
    }

    fn durable(&self) -> bool {
        matches!(
            self.work,
            Work::Flush | Work::Write { fua: true, .. } | Work::Zero { fua: true, .. }
        )
    }
}

pub(super) enum Msg {
    Job(Job),
    Stop,
}

pub(super) fn error_of(e: &DiskError) -> (u32, String) {
    match e {
        DiskError::Usage(m) => (errno::EINVAL, m.clone()),
        other => (errno::EIO, other.to_string()),
    }
}

/// The worker: owns the disk, runs queued jobs as ORAM batches. Returns `Failed` if the store
/// failed at any point (it then answers every later job with `EIO` and does not close).
pub(super) fn worker<D: BlockDevice>(
    mut disk: D,
    inbox: mpsc::Receiver<Msg>,
    stats: Arc<ExportStats>,
    failed: watch::Sender<Option<String>>,
) -> Result<(), ExportError> {
    let mut broken: Option<String> = None;
    loop {
        let first = match next_message(&inbox, &mut disk, broken.is_none()) {
            Ok(Some(msg)) => msg,
            Ok(None) => break,
            Err(why) => {
                tracing::error!("NBD export: the store failed: {why}; refusing further requests");
                let _ = failed.send(Some(why.clone()));
                broken = Some(why);
                continue;
            }
        };
        let mut batch = vec![first];
        while !matches!(
            batch.last(),
            Some(
                Msg::Stop
                    | Msg::Job(Job {
                        work: Work::Flush,
                        ..
                    })
            )
        ) {
            match inbox.try_recv() {
                Ok(msg) => batch.push(msg),
                Err(_) => break,
            }
        }
        let stop = matches!(batch.last(), Some(Msg::Stop));
        // Work for a connection that closed is dropped before it runs.
        let mut jobs = Vec::with_capacity(batch.len());
        for msg in batch {
            if let Msg::Job(job) = msg {
                if job.to.is_closed() {
                    stats.jobs_dropped.fetch_add(1, Ordering::Relaxed);
                } else {
                    jobs.push(job);
                }
            }
        }
        stats
            .jobs_run
            .fetch_add(jobs.len() as u64, Ordering::Relaxed);
        match &broken {
            Some(why) => {
                for job in jobs {
                    job.answer(Err((errno::EIO, why.clone())));
                }
            }
            None => {
                if let Err(why) = run_batch(&mut disk, jobs, stop) {
                    tracing::error!(
                        "NBD export: the store failed: {why}; refusing further requests"
                    );
                    let _ = failed.send(Some(why.clone()));
                    broken = Some(why);
                }
            }
        }
        if stop {
            break;
        }
    }
    match broken {
        Some(why) => Err(ExportError::Failed(why)),
        None => Ok(disk.close()?),
    }
}

/// The next message for the worker (`None`: every sender is gone). While none is queued and
/// the store owes shuffle work (and `shuffle` is set), runs that work a wave at a time,
/// checking for a message between waves. Returns the store's failure.
pub(super) fn next_message<D: BlockDevice>(
    inbox: &mpsc::Receiver<Msg>,
    disk: &mut D,
    shuffle: bool,
) -> Result<Option<Msg>, String> {
    loop {
        if !shuffle || disk.shuffle_owed() == 0 {
            return Ok(inbox.recv().ok());
        }
        match inbox.try_recv() {
            Ok(msg) => return Ok(Some(msg)),
            Err(mpsc::TryRecvError::Disconnected) => return Ok(None),
            Err(mpsc::TryRecvError::Empty) => {
                disk.shuffle_some().map_err(|e| e.to_string())?;
            }
        }
    }
}

/// What one job waits for after its block requests are queued.
pub(super) enum Ticket {
    Read(Vec<(u64, u32, u32)>),
    Done,
    Failed((u32, String)),
}

/// Runs one batch: queues every job's block requests, runs the ORAM until all are answered,
/// flushes if any job (or `stop`) needs it, answers every job. Returns the store's failure.
pub(super) fn run_batch<D: BlockDevice>(
    disk: &mut D,
    jobs: Vec<Job>,
    stop: bool,
) -> Result<(), String> {
    let mut broken: Option<String> = None;
    let mut answers = HashMap::new();
    let mut tickets = Vec::with_capacity(jobs.len());
    for job in &jobs {
        let ticket = match &job.work {
            Work::Zero { offset, length, .. } => {
                match write_zeroes(disk, *offset, *length, &job.to, &mut answers) {
                    Ok(()) => Ticket::Done,
                    Err(DiskError::Usage(m)) => Ticket::Failed((errno::ENOSPC, m)),
                    Err(e) => {
                        broken = Some(e.to_string());
                        Ticket::Failed(error_of(&e))
                    }
                }
            }
            Work::Read { offset, length } => match disk.submit_read(*offset, u64::from(*length)) {
                Ok(ids) => Ticket::Read(ids),
                Err(e) => Ticket::Failed(error_of(&e)),
            },
            Work::Write { offset, data, .. } => match disk.submit_write(*offset, data) {
                Ok(_) => Ticket::Done,
                Err(DiskError::Usage(m)) => Ticket::Failed((errno::ENOSPC, m)),
                Err(e) => Ticket::Failed(error_of(&e)),
            },
            Work::Flush => Ticket::Done,
        };
        tickets.push(ticket);
        if broken.is_some() {
            break;
        }
    }
    while broken.is_none() && disk.pending() > 0 {
        match disk.step() {
            Ok(done) => answers.extend(done.into_iter().map(|a| (a.id, a.data))),
            Err(e) => broken = Some(e.to_string()),
        }
    }
    let durable = stop || jobs.iter().any(Job::durable);
    if broken.is_none() && durable {
        if let Err(e) = disk.flush() {
            broken = Some(format!("flush failed: {e}"));
        }
    }
    let mut tickets = tickets.into_iter();
    for job in jobs {
        let result = match (&broken, tickets.next()) {
            (Some(why), _) => Err((errno::EIO, why.clone())),
            (None, Some(Ticket::Failed(e))) => Err(e),
            (None, Some(Ticket::Read(ids))) => read_result(&answers, ids),
            (None, Some(Ticket::Done)) => Ok(Vec::new()),
            (None, None) => Err((errno::EIO, "internal: a job was not queued".into())),
        };
        job.answer(result);
    }
    match broken {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

pub(super) fn read_result(answers: &HashMap<u64, Vec<u8>>, ids: Vec<(u64, u32, u32)>) -> JobResult {
    let mut out = Vec::new();
    for (id, within, take) in ids {
        match answers
            .get(&id)
            .and_then(|block| block.get(within as usize..(within + take) as usize))
        {
            Some(bytes) => out.extend_from_slice(bytes),
            None => {
                return Err((
                    errno::EIO,
                    "internal: a block read was not answered".to_string(),
                ))
            }
        }
    }
    Ok(out)
}

/// Writes zeroes over a range of any length, 1 MiB at a time (`NBD_CMD_WRITE_ZEROES` may
/// cover the whole disk), answering other queued requests on the way. Stops early, unanswered,
/// when the connection that asked has closed.
pub(super) fn write_zeroes<D: BlockDevice>(
    disk: &mut D,
    offset: u64,
    length: u64,
    to: &Outbox,
    answers: &mut HashMap<u64, Vec<u8>>,
) -> Result<(), DiskError> {
    const STEP: u64 = 1 << 20;
    if offset
        .checked_add(length)
        .is_none_or(|end| end > disk.size())
    {
        return Err(DiskError::Usage(format!(
            "zeroes at {offset}+{length} are past the end of the disk"
        )));
    }
    let zeros = vec![0u8; STEP as usize];
    let mut at = offset;
    while at < offset + length && !to.is_closed() {
        let take = STEP.min(offset + length - at);
        disk.submit_write(at, &zeros[..take as usize])?;
        while disk.pending() > 0 {
            answers.extend(disk.step()?.into_iter().map(|a| (a.id, a.data)));
        }
        at += take;
    }
    Ok(())
}
