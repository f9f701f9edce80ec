//! The NBD export: serves a [`Disk`] to NBD clients over a socket.
//!
//! One worker thread owns the [`Disk`] (the ORAM is a sequential state machine); connections
//! are tokio tasks that parse requests with [`crate::nbd`], send jobs to the worker and write
//! replies as they come back (NBD allows any order). The worker takes every job queued so far
//! (up to a flush), runs them as ORAM batches of up to 32 requests, and answers each job only
//! after all of its block reads completed.

use std::collections::HashMap;
use std::future::Future;
use std::sync::mpsc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use super::{command, errno, Negotiation, Next, Replies, RequestHeader};
use crate::{Disk, DiskError};

/// Why the export stopped without closing the store cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The store failed.
    #[error(transparent)]
    Disk(#[from] DiskError),
    /// The ORAM worker thread panicked.
    #[error("the ORAM worker panicked")]
    Panicked,
}

/// A reply to a job: bytes read (possibly none), or an NBD error number and message.
type JobResult = std::result::Result<Vec<u8>, (u32, String)>;

enum Job {
    Read {
        offset: u64,
        length: u32,
        reply: oneshot::Sender<JobResult>,
    },
    Write {
        offset: u64,
        data: Vec<u8>,
        fua: bool,
        reply: oneshot::Sender<JobResult>,
    },
    Zero {
        offset: u64,
        length: u64,
        fua: bool,
        reply: oneshot::Sender<JobResult>,
    },
    Flush {
        reply: oneshot::Sender<JobResult>,
    },
    Stop,
}

fn error_of(e: &DiskError) -> (u32, String) {
    match e {
        DiskError::Usage(m) => (errno::EINVAL, m.clone()),
        other => (errno::EIO, other.to_string()),
    }
}

/// The worker: owns the disk, runs queued jobs as ORAM batches.
fn worker(mut disk: Disk, jobs: mpsc::Receiver<Job>) -> Result<(), DiskError> {
    let mut broken: Option<String> = None;
    loop {
        let Ok(first) = jobs.recv() else { break };
        let mut batch = vec![first];
        while !matches!(batch.last(), Some(Job::Flush { .. } | Job::Stop)) {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let stop = matches!(batch.last(), Some(Job::Stop));
        if let Some(why) = &broken {
            for job in batch {
                reply_to(job, Err((errno::EIO, why.clone())));
            }
            if stop {
                break;
            }
            continue;
        }
        // Queue every job's block requests, then run the ORAM until all are answered.
        enum Ticket {
            Read(Vec<(u64, u32, u32)>),
            Done,
            Failed((u32, String)),
        }
        let mut answers = HashMap::new();
        let mut tickets = Vec::with_capacity(batch.len());
        for job in &batch {
            if let Job::Zero { offset, length, .. } = job {
                tickets.push(
                    match write_zeroes(&mut disk, *offset, *length, &mut answers) {
                        Ok(()) => Ticket::Done,
                        Err(DiskError::Usage(m)) => Ticket::Failed((errno::ENOSPC, m)),
                        Err(e) => {
                            broken = Some(e.to_string());
                            Ticket::Failed(error_of(&e))
                        }
                    },
                );
                continue;
            }
            tickets.push(match job {
                Job::Read { offset, length, .. } => {
                    match disk.submit_read(*offset, u64::from(*length)) {
                        Ok(ids) => Ticket::Read(ids),
                        Err(e) => Ticket::Failed(error_of(&e)),
                    }
                }
                Job::Write { offset, data, .. } => match disk.submit_write(*offset, data) {
                    Ok(_) => Ticket::Done,
                    Err(DiskError::Usage(m)) => Ticket::Failed((errno::ENOSPC, m)),
                    Err(e) => Ticket::Failed(error_of(&e)),
                },
                Job::Flush { .. } | Job::Stop | Job::Zero { .. } => Ticket::Done,
            });
        }
        while broken.is_none() && disk.pending() > 0 {
            match disk.step() {
                Ok(done) => answers.extend(done.into_iter().map(|a| (a.id, a.data))),
                Err(e) => {
                    eprintln!("pir oram nbd: {e}; refusing further requests");
                    broken = Some(e.to_string());
                    break;
                }
            }
        }
        let durable = batch.iter().any(|j| {
            matches!(
                j,
                Job::Flush { .. }
                    | Job::Write { fua: true, .. }
                    | Job::Zero { fua: true, .. }
                    | Job::Stop
            )
        });
        let mut flush_error = None;
        if broken.is_none() && durable {
            if let Err(e) = disk.flush() {
                eprintln!("pir oram nbd: flush failed: {e}; refusing further requests");
                broken = Some(e.to_string());
                flush_error = Some(e.to_string());
            }
        }
        for (job, ticket) in batch.into_iter().zip(tickets) {
            let result = match (&broken, ticket) {
                (_, Ticket::Failed(e)) => Err(e),
                (Some(why), _) => Err((errno::EIO, why.clone())),
                (None, Ticket::Read(ids)) => {
                    let mut out = Vec::new();
                    let mut missing = false;
                    for (id, within, take) in ids {
                        match answers.get(&id) {
                            Some(block) => out.extend_from_slice(
                                &block[within as usize..(within + take) as usize],
                            ),
                            None => missing = true,
                        }
                    }
                    if missing {
                        Err((
                            errno::EIO,
                            "internal: a block read was not answered".to_string(),
                        ))
                    } else {
                        Ok(out)
                    }
                }
                (None, Ticket::Done) => Ok(Vec::new()),
            };
            let result = match (&flush_error, result) {
                (Some(e), Ok(_)) => Err((errno::EIO, e.clone())),
                (_, r) => r,
            };
            reply_to(job, result);
        }
        if stop {
            break;
        }
    }
    if broken.is_none() {
        disk.close()?;
    }
    Ok(())
}

/// Writes zeroes over a range of any length, 1 MiB at a time (`NBD_CMD_WRITE_ZEROES` may
/// cover the whole disk), answering other queued requests on the way.
fn write_zeroes(
    disk: &mut Disk,
    offset: u64,
    length: u64,
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
    while at < offset + length {
        let take = STEP.min(offset + length - at);
        disk.submit_write(at, &zeros[..take as usize])?;
        while disk.pending() > 0 {
            answers.extend(disk.step()?.into_iter().map(|a| (a.id, a.data)));
        }
        at += take;
    }
    Ok(())
}

fn reply_to(job: Job, result: JobResult) {
    let reply = match job {
        Job::Read { reply, .. }
        | Job::Write { reply, .. }
        | Job::Zero { reply, .. }
        | Job::Flush { reply } => reply,
        Job::Stop => return,
    };
    let _ = reply.send(result);
}

/// Serves `disk` on `listener` until `shutdown` completes, then finishes queued requests,
/// flushes and closes the store.
pub async fn serve(
    disk: Disk,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ExportError> {
    let (size, block_size) = (disk.size(), disk.geometry().block_size);
    let (jobs, inbox) = mpsc::channel::<Job>();
    let worker = std::thread::spawn(move || worker(disk, inbox));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let jobs = jobs.clone();
                tokio::spawn(async move {
                    if let Err(e) = connection(stream, jobs, size, block_size).await {
                        tracing::info!("NBD connection closed: {e}");
                    }
                });
            }
            _ = &mut shutdown => break,
        }
    }
    let _ = jobs.send(Job::Stop);
    drop(jobs);
    match worker.join() {
        Ok(result) => Ok(result?),
        Err(_) => Err(ExportError::Panicked),
    }
}

async fn connection(
    mut stream: TcpStream,
    jobs: mpsc::Sender<Job>,
    size: u64,
    block_size: u32,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    stream.write_all(&super::greeting()).await?;
    let mut flags = [0u8; 4];
    stream.read_exact(&mut flags).await?;
    let mut negotiation = Negotiation::new(flags, size, block_size).map_err(invalid)?;
    loop {
        let mut header = [0u8; 16];
        stream.read_exact(&mut header).await?;
        let (option, len) = Negotiation::header(header).map_err(invalid)?;
        let mut data = vec![0u8; len as usize];
        stream.read_exact(&mut data).await?;
        match negotiation.option(option, &data) {
            Next::Reply(bytes) => stream.write_all(&bytes).await?,
            Next::Transmit(bytes) => {
                stream.write_all(&bytes).await?;
                break;
            }
            Next::Close(bytes) => {
                stream.write_all(&bytes).await?;
                return Ok(());
            }
        }
    }
    let replies = Replies {
        structured: negotiation.structured,
    };
    let (mut reader, mut writer) = stream.into_split();
    let (out, mut outbox) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let writer_task = tokio::spawn(async move {
        while let Some(bytes) = outbox.recv().await {
            if writer.write_all(&bytes).await.is_err() {
                break;
            }
        }
    });
    loop {
        let mut header = [0u8; 28];
        if reader.read_exact(&mut header).await.is_err() {
            break;
        }
        let request = RequestHeader::parse(header).map_err(invalid)?;
        let mut payload = vec![0u8; request.payload().min(super::MAX_PAYLOAD) as usize];
        if request.payload() > super::MAX_PAYLOAD {
            // The connection cannot be resynchronised after an oversized write.
            return Err(invalid(format!(
                "a write of {} bytes (the limit is {})",
                request.payload(),
                super::MAX_PAYLOAD
            )));
        }
        reader.read_exact(&mut payload).await?;
        let fua = request.flags & command::FLAG_FUA != 0;
        let (reply, answer) = oneshot::channel();
        let job = match request.command {
            command::READ if request.length <= super::MAX_PAYLOAD => Some(Job::Read {
                offset: request.offset,
                length: request.length,
                reply,
            }),
            command::WRITE => Some(Job::Write {
                offset: request.offset,
                data: payload,
                fua,
                reply,
            }),
            command::WRITE_ZEROES => Some(Job::Zero {
                offset: request.offset,
                length: u64::from(request.length),
                fua,
                reply,
            }),
            command::FLUSH => Some(Job::Flush { reply }),
            // Trim and cache are hints; doing nothing is allowed and reveals nothing.
            command::TRIM | command::CACHE => {
                let _ = out.send(replies.done(request.cookie));
                None
            }
            command::DISC => break,
            command::READ => {
                let _ =
                    out.send(replies.error(request.cookie, errno::EOVERFLOW, "request too large"));
                None
            }
            _ => {
                let _ =
                    out.send(replies.error(request.cookie, errno::EINVAL, "unsupported command"));
                None
            }
        };
        let Some(job) = job else { continue };
        if jobs.send(job).is_err() {
            let _ =
                out.send(replies.error(request.cookie, errno::ESHUTDOWN, "the store is closing"));
            continue;
        }
        let out = out.clone();
        tokio::spawn(async move {
            let bytes = match answer.await {
                Ok(Ok(data)) if request.command == command::READ => {
                    replies.data(request.cookie, request.offset, &data)
                }
                Ok(Ok(_)) => replies.done(request.cookie),
                Ok(Err((code, message))) => replies.error(request.cookie, code, &message),
                Err(_) => replies.error(request.cookie, errno::ESHUTDOWN, "the store is closing"),
            };
            let _ = out.send(bytes);
        });
    }
    drop(out);
    let _ = writer_task.await;
    Ok(())
}


fn invalid(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
}
