//! The writing half of a monitor's connection: a task per connection that writes the replies
//! queued for its monitor (the bed's acks and per-frame errors, the connection's own errors)
//! in order, and at the end the close frame.
//!
//! The connection's reading never waits on it. Replies are queued without waiting into a
//! bounded queue ([`queue`]); a monitor that stops reading its replies stalls only this task,
//! its queue fills, and further replies are dropped and counted
//! (`holmes_monitor_replies_dropped_total`, the bed's `replies_dropped` in `/api/beds`), while
//! its frames are still read and its windows scored. What such a connection holds is the
//! queue's depth of replies and the frame in its socket's buffer, however long it stalls.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures_util::SinkExt;
use futures_util::stream::SplitSink;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::protocol::ServerMsg;
use crate::serving::ward::count_dropped_reply;

/// The writer of one connection.
pub(super) struct Writer {
    /// Asks the writer for the close frame once the queued replies are written.
    close: oneshot::Sender<(u16, String)>,
    task: JoinHandle<()>,
}

/// Starts the writer of `sink`, writing what arrives on `replies`.
pub(super) fn spawn(
    sink: SplitSink<WebSocket, Message>,
    replies: mpsc::Receiver<ServerMsg>,
) -> Writer {
    let (close, close_rx) = oneshot::channel();
    Writer {
        close,
        task: tokio::spawn(write(sink, replies, close_rx)),
    }
}

async fn write(
    mut sink: SplitSink<WebSocket, Message>,
    mut replies: mpsc::Receiver<ServerMsg>,
    mut close: oneshot::Receiver<(u16, String)>,
) {
    loop {
        tokio::select! {
            // What was queued before the close goes out before it.
            biased;
            m = replies.recv() => match m {
                Some(m) => {
                    if sink.send(Message::Text(m.to_text().into())).await.is_err() {
                        return;
                    }
                }
                None => return,
            },
            c = &mut close => {
                if let Ok((code, reason)) = c {
                    let frame = CloseFrame { code, reason: reason.into() };
                    let _ = sink.send(Message::Close(Some(frame))).await;
                }
                return;
            }
        }
    }
}

impl Writer {
    /// Ends the connection's writing: the queued replies, then a close frame with `reason`
    /// (None: the link is gone, nothing more is written), within [`super::SEND_TIMEOUT`].
    pub(super) async fn finish(self, reason: Option<(u16, String)>) {
        let Writer { close, mut task } = self;
        match reason {
            Some(r) => {
                let _ = close.send(r);
            }
            None => drop(close),
        }
        if tokio::time::timeout(super::SEND_TIMEOUT, &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }
}

/// Why a reply could not be queued.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct WriterGone;

/// Queues a reply without waiting. A full queue (the monitor is not reading) drops it and
/// counts it in `dropped`; a writer that is gone (the link broke) is an error.
pub(super) fn queue(
    replies: &mpsc::Sender<ServerMsg>,
    m: ServerMsg,
    dropped: &Arc<AtomicU64>,
) -> Result<(), WriterGone> {
    match replies.try_send(m) {
        Ok(()) => Ok(()),
        Err(TrySendError::Full(_)) => {
            count_dropped_reply(dropped);
            Ok(())
        }
        Err(TrySendError::Closed(_)) => Err(WriterGone),
    }
}
